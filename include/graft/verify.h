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

// Stochastic (T > 0) verification by the target's own sample: at an accepted node of
// depth d the target's token is y = sampler.Sample(target_dist(node), position + d)
// (inverse CDF in token order of a uniform keyed by the output position alone); the
// child whose token is y is accepted, and where none is, y is the bonus. `position`
// is the output position of the token after the root (0 = the request's first new
// token); `target_dist(node)` the target's sampling distribution (MakeDistribution with
// the request's params) after the context + path root..node, called once per accepted
// node.
// Every committed token is thus the one plain sampling draws at its position with the
// same seed, whatever the tree: graft, every other method and ar write the same tokens
// (up to near-ties where batched and single-row kernels round the logits differently).
// Lossless for any tree of distinct siblings, every proposal a point mass: a child x
// is accepted with probability p(x), and the bonus, drawn where no child is, has the
// residual distribution p without the children, renormalised. The probability that
// some child is accepted, and which, is the same as under the residual rule (accept x
// with p_res(x), else remove it and renormalise), so acceptance is not lower; a draft
// *sampled* from q would accept more under min(1, p/q), but every method proposes
// tokens by rank or retrieval, not by sampling. `tested` is as VerifyGreedy's (every
// child of an accepted node, the accepted one marked). With a greedy distribution
// (T = 0) it returns what VerifyGreedy returns. O(n) plus one SampleToken per accepted
// node.
VerifyResult VerifyStochastic(const TokenTree& tree,
                              const std::function<Distribution(int32_t node)>& target_dist,
                              const PositionSampler& sampler, int64_t position);

// Feeds every tested node of `result` to `calibration` (source, edge prob, depth,
// accepted). Only tested nodes are recorded: their parent was accepted. Then one
// request-level trial per (tested position, source) (Calibration::RecordRequest):
// siblings exclude each other, so rejected alternatives at one position are one miss.
// O(tested^2) (a handful per pass).
void RecordOutcome(const TokenTree& tree, const VerifyResult& result, Calibration* calibration);

}  // namespace graft
