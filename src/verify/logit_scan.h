// Whole-row scans of a logit vector, run once per verified node: the greedy choice
// (Argmax) and the softmax normaliser of the next-token table's top-k (TopKSoftmax).
// A row holds the whole vocabulary (152k floats for Qwen2.5), so a scalar loop costs
// 0.1-0.7 ms, a few percent of a 30 ms CPU decoding step; these run 8 lanes at a time
// (GCC vector extensions: SSE2 anywhere, AVX2 where the CPU has it, chosen at load).
// Pure C++.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graft/types.h"

namespace graft {

// The largest logit, NaN ignored (-inf when every logit is NaN or -inf, or n == 0).
// Exact: the same value as a scalar loop. O(n).
float MaxLogit(const float* logits, int32_t n);

// The first i in [from, n) with logits[i] > threshold, or n. O(n - from).
int32_t FirstAbove(const float* logits, int32_t from, int32_t n, float threshold);

// The k largest logits as (logit, token), best first, ties to the lower token; NaN and
// -inf never count (fewer than k entries when fewer logits are above -inf). A heap of
// k, fed only logits above its worst (FirstAbove skips the rest a block at a time).
// O(n + k log k log n) expected for a row in random order.
void TopKLogits(const float* logits, int32_t n, int32_t k, std::vector<std::pair<float, Token>>* out);

// sum over i with logits[i] > cut of e^(logits[i] - mx), for mx >= every such logit
// and cut >= mx - 80 (terms below the cut are left out; NaN never counts). Each
// exponential is a polynomial times a power of two, within 1e-6 of e^x; lanes are
// summed in a fixed order, so a build gives the same sum for the same row. O(n).
float SumExpAbove(const float* logits, int32_t n, float mx, float cut);

// w[i] = e^x with x = (logits[i] - mx) * inv_t in float, for every i; 0 where x is
// below -87 (a weight under 1.6e-38 of the largest; NaN and -inf too), for a finite
// mx >= every logit and inv_t > 0. Each weight is within 1e-6 of e^x; returns their
// sum (lanes per block in float, blocks in double). O(n).
double SoftmaxWeights(const float* logits, int32_t n, float mx, float inv_t, float* w);

}  // namespace graft
