// Token sampling shared by plain autoregressive decoding and speculative verification,
// so both paths draw the same token from the same distribution at the same position
// (PositionSampler). Pure C++: no llama.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graft/types.h"

namespace graft {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax, ties to the lowest token id)
  int top_k = 0;             // keep the k highest logits; <= 0: keep all
  float top_p = 1.0f;        // nucleus: keep the smallest prefix with mass >= top_p; >= 1: keep all
  // The draws of a request (PositionSampler): the token at output position t is drawn
  // with a uniform that depends on (seed, stream, t) alone, so the same seed gives the
  // same text whatever the method, tree, batch or learned state.
  uint64_t seed = 0;
  // A per-request key beside the seed, for requests that share a seed but must not
  // share draws (several choices of one request). 0 for every caller today: a request
  // is reproduced by its seed alone, never by its slot or arrival order.
  uint64_t stream = 0;
};

// A sparse probability distribution over the tokens that can be sampled.
struct Distribution {
  std::vector<Token> token;  // [m], distinct; every token not listed has probability 0
  std::vector<float> prob;   // [m], > 0, sums to 1 up to float rounding

  int32_t size() const { return static_cast<int32_t>(token.size()); }
  // Probability of `t` (0 if absent). O(m).
  float Prob(Token t) const;
  // Most probable token, ties to the lowest id; kNoToken if empty. O(m).
  Token Mode() const;
};

// Index of the largest logit, ties to the lowest token id; NaN counts as -inf.
// Throws std::invalid_argument for n_vocab <= 0. O(n_vocab).
Token Argmax(const float* logits, int32_t n_vocab);

// The sampling distribution of `params` over `logits` ([n_vocab]). Order of the chain:
//   1. temperature <= 0: point mass on Argmax (top_k / top_p ignored);
//   2. top-k on the raw logits (ties at the cut to the lowest ids);
//   3. softmax of logits / temperature;
//   4. top-p: keep the most probable tokens (ties to the lowest id) until their mass
//      reaches top_p (at least one), then renormalise.
// (llama.cpp's default chain applies top-p before temperature; ours is the documented
// one above and is the only sampler the engine uses, plain or speculative.)
// Entries are sorted by probability (descending, ties to the lower id) when top-k or
// top-p cut; otherwise they are in token order. -inf / NaN logits get probability 0.
// Throws std::invalid_argument if no token has a finite logit.
// Without top-k (and with a finite max) the softmax runs over the whole row in float,
// 8 lanes at a time (verify/logit_scan.h): each weight within 1e-6 of e^x for its
// exponent x in float, a token whose weight is below e^-87 of the best gets
// probability 0, and a top_p within about 1e-6 of 1 may keep a few tokens more or
// fewer than exact arithmetic would; top-k weights are in double.
// Cost: O(V) for greedy or plain softmax and with top-k (plus k log k), O(V + m log m)
// for top-p without top-k, m the tokens within 4 T (then 8 T, ... 64 T, then all) of
// the best logit until they reach top_p. Measured on a 152k-token row
// (bench/logit_scan_bench): top-p 0.95 0.13 ms (16 ms with a full sort), top-k 40
// 0.04 ms (1.6 ms), no cut 1 ms.
Distribution MakeDistribution(const float* logits, int32_t n_vocab, const SamplingParams& params);
inline Distribution MakeDistribution(std::span<const float> logits, const SamplingParams& params) {
  return MakeDistribution(logits.data(), static_cast<int32_t>(logits.size()), params);
}

// Deterministic PRNG (xoshiro256**, seeded through splitmix64): the same seed gives the
// same stream on every platform. 32 bytes of state; copyable.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

// Inverse CDF of `dist` at `u` in [0, 1): the tokens in increasing id, whatever order
// the entries are stored in, their probabilities summed in double in that order (u is
// scaled by their sum). So a distribution gives the same token for the same u on every
// path, and one made from slightly different logits (batched and single-row kernels)
// gives another token only where u lies within their difference of a boundary.
// Throws std::invalid_argument on an empty distribution. O(m) for entries stored in id
// order (no top-k / top-p cut), O(m log m) otherwise.
Token SampleToken(const Distribution& dist, double u);
// SampleToken(dist, rng.Uniform()): exactly one Uniform().
Token SampleToken(const Distribution& dist, Rng& rng);

// The sampler every method shares at T > 0 (docs/design.md §1 step 5): the token at
// output position t (0 = the request's first new token) is SampleToken(p_t, Uniform(t)),
// p_t the target's distribution there and Uniform(t) a counter-based hash of (seed,
// stream, t) alone. Plain decoding draws it; tree verification accepts the child equal
// to it. Copyable, 16 bytes, no state: any pass may ask for any position.
class PositionSampler {
 public:
  explicit PositionSampler(const SamplingParams& params) : seed_(params.seed), stream_(params.stream) {}
  // Uniform in [0, 1) with 53 bits: splitmix64's finaliser over (seed, stream, t). O(1).
  double Uniform(int64_t position) const;
  Token Sample(const Distribution& dist, int64_t position) const { return SampleToken(dist, Uniform(position)); }

 private:
  uint64_t seed_;
  uint64_t stream_;
};

// A fresh random seed for a request that gave none (std::random_device), below 2^53 so
// that JSON readers holding numbers as doubles keep it exact when it is reported.
uint64_t FreshSeed();

}  // namespace graft
