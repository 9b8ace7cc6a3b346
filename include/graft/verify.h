// Verification of a proposal tree against the target (docs/design.md §1 step 5).
// Pure C++: the engine adapts the target's logits into the callbacks below.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "graft/calibration.h"
#include "graft/sampling.h"
#include "graft/tree.h"

namespace graft {

struct VerifyResult {
  std::vector<int32_t> accepted;  // node indices root..last accepted node, root first (never empty)
  Token bonus = kNoToken;         // the target's token after the last accepted node
  // Every child of an accepted node, i.e. every node the target actually tested, with
  // whether it was accepted (at most one per accepted parent). Children of rejected
  // nodes were never tested and are absent. Feeds Calibration (see RecordOutcome).
  std::vector<int32_t> tested;          // node indices, in test order
  std::vector<uint8_t> tested_accepted; // [tested.size()], 1 = accepted

  int32_t last_accepted() const { return accepted.back(); }
  // Proposed tokens accepted (the root is not a proposal).
  int32_t num_accepted_proposals() const { return static_cast<int32_t>(accepted.size()) - 1; }
  // The tokens this step commits: accepted proposals (root excluded) then the bonus.
  std::vector<Token> CommittedTokens(const TokenTree& tree) const;
};

// Greedy verification. `target_argmax(node)` is the target's argmax (ties to the lowest
// id) after the context + path root..node; it is called once per accepted node.
// From the root, follow the child whose token equals the argmax; the bonus is the
// argmax at the last accepted node. Every committed token is thus the target's choice
// at the position that verified it. O(n + accepted * callback).
VerifyResult VerifyGreedy(const TokenTree& tree,
                          const std::function<Token(int32_t node)>& target_argmax);

// Stochastic (T > 0) verification, lossless for any tree of distinct siblings whatever
// their source: each proposal is treated as a point mass. `target_dist(node)` is the
// target's sampling distribution (MakeDistribution with the request's params) after
// the context + path root..node; called once per accepted node.
// At an accepted node with distribution p: p_res = p; try the children in index order:
// accept child x with probability p_res(x), else set p_res(x) = 0 and renormalise; if
// all children are rejected the bonus is drawn from p_res; if the accepted path ends
// at a node without accepted child (a leaf, or all rejected) the bonus is drawn from
// p_res there (= p at a leaf). Each child x ends up accepted with probability exactly
// p(x), so the committed tokens are distributed as plain sampling with SampleToken.
// Draws one Uniform() per tried child of nonzero probability, plus one for the bonus. With a greedy
// distribution (T = 0) it returns the same path and bonus as VerifyGreedy.
// O(n + tried * m) for distributions of m entries.
VerifyResult VerifyStochastic(const TokenTree& tree,
                              const std::function<Distribution(int32_t node)>& target_dist,
                              Rng& rng);

// Feeds every tested node of `result` to `calibration` (source, edge prob, depth,
// accepted). Only tested nodes are recorded: their parent was accepted. Then one
// request-level trial per (tested position, source) (Calibration::RecordRequest):
// siblings exclude each other, so rejected alternatives at one position are one miss.
// O(tested^2) (a handful per pass).
void RecordOutcome(const TokenTree& tree, const VerifyResult& result, Calibration* calibration);

}  // namespace graft
