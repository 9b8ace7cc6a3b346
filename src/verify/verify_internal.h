// Internal to graft_verify and its tests: the stochastic verifier with a selectable
// acceptance rule, so tests can show that a biased rule is detected.
#pragma once

#include <functional>

#include "graft/verify.h"

namespace graft::internal {

enum class AcceptRule {
  kExact,            // accept x with probability p_res(x): lossless
  kBiasedForTest,    // accept x with probability min(1, 2 p_res(x)): NOT lossless
};

VerifyResult VerifyStochasticWithRule(const TokenTree& tree,
                                      const std::function<Distribution(int32_t node)>& target_dist,
                                      Rng& rng, AcceptRule rule);

}  // namespace graft::internal
