// Shadow trials: what the candidates a step did not verify would have done. Pure C++.
//
// A step's tree is cut to the size its pass pays for (KeepBestSize), and RecordOutcome
// records verified nodes only, so a calibration that has learnt a source to be poor
// stops verifying it and never learns otherwise: replayed on 80 recorded outputs in one
// shuffled order (bench/replay_retrieval, a machine whose 2-row pass costs 1.74x a
// 1-row one), early misses left every later prompt, summaries included, at 1.00x.
// Yet the output settles every candidate at no cost: a node whose parent's path the
// output followed would have been accepted exactly when the output goes on with its
// token (verification, greedy or sampled, accepts the child equal to the target's
// token at its position: VerifyStochastic). ShadowTrials keeps each step's full
// candidate tree and, as tokens are committed, records into the calibration every
// node that was not verified and whose parent's path the output followed: the same
// trials, in the same cells, as RecordOutcome's.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "graft/calibration.h"
#include "graft/tree.h"
#include "graft/types.h"

namespace graft {

class ShadowTrials {
 public:
  // Trees followed at once; the oldest is dropped beyond it (each lives until the
  // output leaves its paths, at most its depth in tokens). Bounds the work per commit.
  static constexpr size_t kMaxPending = 8;

  // The candidate tree of a step, rooted at the step's last committed token, before it
  // was cut; `verified` holds the indices in `tree` of the nodes that went into the pass
  // (Prune's kept_index): their outcome is RecordOutcome's. Nor are kOracle nodes
  // recorded. Greedy or sampled, a node is accepted exactly when the output goes on with
  // its token (verification follows the target's token at each position), so drafted
  // and retrieved nodes are learnt from alike. O(n).
  void Add(TokenTree tree, std::span<const int32_t> verified);

  // Tokens committed after the roots of the pending trees (a step's emitted tokens, in
  // order): records every resolved node that was not verified, and drops the trees
  // the output has left. O(pending trees * (tokens + nodes)).
  void Commit(std::span<const Token> emitted, Calibration* calibration);

  // Forgets every pending tree (a new request). O(1).
  void Clear() { pending_.clear(); }

  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    TokenTree tree;
    std::vector<uint8_t> skip;
    int32_t at = 0;  // the node the output has followed so far
  };
  std::deque<Pending> pending_;
};

}  // namespace graft
