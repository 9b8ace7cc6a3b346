// Top-k of a logit row with softmax probabilities, shared by the drafter (children
// of a draft node) and the engine (next-token table updates from verification).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graft/types.h"

namespace graft {

// Fills `out` with the k largest logits of `logits` ([n_vocab]) as (softmax prob,
// token), best first, ties to the lower token id. The normaliser skips terms below
// max - 20: they add at most n_vocab * e^-20 (3e-4 for 150k tokens) relative to
// the sum. NaN and -inf logits never count. These probabilities rank and score
// proposals; sampling uses MakeDistribution. O(V) (verify/logit_scan.h).
void TopKSoftmax(const float* logits, int32_t n_vocab, int32_t k, std::vector<std::pair<float, Token>>* out);

}  // namespace graft
