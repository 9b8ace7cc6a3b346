// Internal to graft_verify and its tests: the stochastic verifier with a selectable
// acceptance rule, so tests can show that a biased rule is detected, and the residual
// rule it replaced, kept as the reference its acceptance is compared with.
#pragma once

#include <cstdint>
#include <functional>

#include "graft/verify.h"

namespace graft::internal {

enum class AcceptRule {
  kTargetSample,   // accept the child equal to the target's sample: lossless
  // The bug of forgetting `position`: every step draws the uniforms of positions 0, 1,
  // ... again, so tokens of different steps share them. Each token alone is still
  // distributed as p; their joint distribution is not. NOT lossless.
  kBiasedForTest,
};

VerifyResult VerifyStochasticWithRule(const TokenTree& tree,
                                      const std::function<Distribution(int32_t node)>& target_dist,
                                      const PositionSampler& sampler, int64_t position, AcceptRule rule);

// The rule before the position-keyed sampler: try the children in index order, accept x
// with probability p_res(x) (one rng.Uniform() each), else set p_res(x) = 0 and
// renormalise; the bonus is drawn from p_res. Lossless too, but which uniform decides a
// position depends on the tree, so the tokens do. O(n + tried * m).
VerifyResult VerifyResidual(const TokenTree& tree, const std::function<Distribution(int32_t node)>& target_dist,
                            Rng& rng);

}  // namespace graft::internal
