#include "logit_scan.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

// The helpers below pass 32-byte vectors by value. They must be inlined into each
// clone (always_inline, at every optimisation level): called out of line, the AVX2
// clone and an SSE2-compiled helper disagree on how such a vector is passed (what
// -Wpsabi warns of), which crashed the -O1 sanitizer build. Inlined, there is no call.
#pragma GCC diagnostic ignored "-Wpsabi"
#define GRAFT_LANES_INLINE __attribute__((always_inline)) inline

namespace graft {
namespace {

constexpr int kLanes = 8;
using Vf = float __attribute__((vector_size(kLanes * sizeof(float))));
using Vi = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));

GRAFT_LANES_INLINE Vf Load(const float* p) {
  Vf v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

GRAFT_LANES_INLINE Vf Splat(float x) { return Vf{} + x; }

// e^x for x in [-87, 0], lane-wise: x = n ln2 + r with n whole and |r| <= ln2 / 2
// (ln2 in two parts, so r keeps its precision for large |x|), e^r by its Taylor
// polynomial of degree 7 (error < 1e-8 on that range), times 2^n built in the
// exponent bits.
GRAFT_LANES_INLINE Vf ExpNonPositive(Vf x) {
  const Vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round: |.| < 2^22
  const Vf r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  Vf p = Splat(1.0f / 5040);
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Vi bits = (__builtin_convertvector(n, Vi) + 127) << 23;
  return p * std::bit_cast<Vf>(bits);
}

}  // namespace

__attribute__((target_clones("avx2", "default")))
float MaxLogit(const float* logits, int32_t n) {
  const float lowest = -std::numeric_limits<float>::infinity();
  Vf m = Splat(lowest);
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Vf x = Load(logits + i);
    m = x > m ? x : m;  // NaN compares false: never taken
  }
  float best = lowest;
  for (int k = 0; k < kLanes; ++k) best = m[k] > best ? m[k] : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  return best;
}

__attribute__((target_clones("avx2", "default")))
int32_t FirstAbove(const float* logits, int32_t from, int32_t n, float threshold) {
  const Vf t = Splat(threshold);
  int32_t i = from;
  for (; i + kLanes <= n; i += kLanes) {
    const Vi above = Load(logits + i) > t;
    Vi any = above;  // OR of the lanes, then one branch per block
    for (int k = 1; k < kLanes; ++k) any[0] |= above[k];
    if (any[0] != 0) break;
  }
  for (; i < n; ++i) {
    if (logits[i] > threshold) return i;
  }
  return n;
}

// Sum of e^x, x = (logits[i] - mx) * inv_t, over the i with x > lo (lo >= -87; NaN
// and -inf never), each term also written to w[i] (0 when left out) when kStore.
// Lanes sum blocks of kBlock values in float, blocks add up in double: a 152k-value
// row then loses about 1e-7 of its sum instead of 1e-5. Inlined into each caller's
// clones, so the AVX2 clone gets AVX2 code.
template <bool kStore>
GRAFT_LANES_INLINE double ExpSum(const float* logits, int32_t n, float mx, float inv_t, float lo, float* w) {
  constexpr int32_t kBlock = 32 * kLanes;
  const Vf vmx = Splat(mx), vinv = Splat(inv_t), vlo = Splat(lo), zero = Splat(0.0f);
  double sum = 0.0;
  int32_t i = 0;
  while (i + kLanes <= n) {
    Vf s = zero;
    for (const int32_t end = std::min(n - kLanes, i + kBlock - kLanes); i <= end; i += kLanes) {
      const Vf x = (Load(logits + i) - vmx) * vinv;
      const auto keep = x > vlo;  // false for NaN and -inf
      const Vf e = keep ? ExpNonPositive(keep ? x : vlo) : zero;
      if constexpr (kStore) std::memcpy(w + i, &e, sizeof(e));
      s += e;
    }
    for (int k = 0; k < kLanes; ++k) sum += s[k];
  }
  for (; i < n; ++i) {
    const float x = (logits[i] - mx) * inv_t;
    const float e = x > lo ? ExpNonPositive(Splat(x))[0] : 0.0f;
    if constexpr (kStore) w[i] = e;
    sum += e;
  }
  return sum;
}

__attribute__((target_clones("avx2", "default")))
float SumExpAbove(const float* logits, int32_t n, float mx, float cut) {
  return static_cast<float>(ExpSum<false>(logits, n, mx, 1.0f, cut - mx, nullptr));
}

__attribute__((target_clones("avx2", "default")))
double SoftmaxWeights(const float* logits, int32_t n, float mx, float inv_t, float* w) {
  return ExpSum<true>(logits, n, mx, inv_t, -87.0f, w);
}

void TopKLogits(const float* logits, int32_t n, int32_t k, std::vector<std::pair<float, Token>>* out) {
  out->clear();
  // A min-heap (by this order) of the k best logits.
  auto better = [](const std::pair<float, Token>& a, const std::pair<float, Token>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const float lowest = -std::numeric_limits<float>::infinity();
  int32_t i = 0;
  while (static_cast<int32_t>(out->size()) < k && (i = FirstAbove(logits, i, n, lowest)) < n) {
    out->push_back({logits[i], i});
    std::push_heap(out->begin(), out->end(), better);
    ++i;
  }
  // Then only logits above the heap's worst can enter (a tie with it has a higher id).
  while (k > 0 && static_cast<int32_t>(out->size()) == k && (i = FirstAbove(logits, i, n, out->front().first)) < n) {
    std::pop_heap(out->begin(), out->end(), better);
    out->back() = {logits[i], i};
    std::push_heap(out->begin(), out->end(), better);
    ++i;
  }
  std::sort_heap(out->begin(), out->end(), better);  // best first
}

}  // namespace graft
