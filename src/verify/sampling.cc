// Sampling: logits -> Distribution (top-k, temperature softmax, top-p), Rng, SampleToken.
#include "graft/sampling.h"

#include "logit_scan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace graft {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

float Finite(float l) {
  return std::isnan(l) ? -std::numeric_limits<float>::infinity() : l;
}

}  // namespace

float Distribution::Prob(Token t) const {
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == t) return prob[i];
  }
  return 0.0f;
}

Token Distribution::Mode() const {
  Token best = kNoToken;
  float best_p = -1.0f;
  for (size_t i = 0; i < token.size(); ++i) {
    if (prob[i] > best_p || (prob[i] == best_p && token[i] < best)) {
      best = token[i];
      best_p = prob[i];
    }
  }
  return best;
}

Token Argmax(const float* logits, int32_t n_vocab) {
  if (n_vocab <= 0) throw std::invalid_argument("Argmax: empty logit vector");
  // The largest value (a vectorised scan), then its first occurrence: ties keep the
  // lowest id. NaN counts as -inf, so a row of NaN and -inf gives token 0.
  const float best_l = MaxLogit(logits, n_vocab);
  for (int32_t v = 0; v < n_vocab; ++v) {
    if (Finite(logits[v]) == best_l) return v;
  }
  return 0;
}

Distribution MakeDistribution(const float* logits, int32_t n_vocab, const SamplingParams& params) {
  Distribution d;
  if (params.temperature <= 0.0f) {
    const Token t = Argmax(logits, n_vocab);
    if (!(Finite(logits[t]) > -std::numeric_limits<float>::infinity())) {
      throw std::invalid_argument("MakeDistribution: no finite logit");
    }
    d.token.push_back(t);
    d.prob.push_back(1.0f);
    return d;
  }
  // Candidates with a finite (or +inf) logit, in token order.
  std::vector<Token> ids;
  ids.reserve(static_cast<size_t>(std::max(n_vocab, 0)));
  for (int32_t v = 0; v < n_vocab; ++v) {
    if (Finite(logits[v]) > -std::numeric_limits<float>::infinity()) ids.push_back(v);
  }
  if (ids.empty()) throw std::invalid_argument("MakeDistribution: no finite logit");
  auto by_logit = [&](Token a, Token b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < ids.size()) {
    std::nth_element(ids.begin(), ids.begin() + params.top_k, ids.end(), by_logit);
    ids.resize(static_cast<size_t>(params.top_k));
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  // Softmax of logits / T in double, relative to the max for stability.
  double max_l = -std::numeric_limits<double>::infinity();
  for (Token t : ids) max_l = std::max(max_l, static_cast<double>(logits[t]));
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  auto weight = [&](Token t) {
    const double l = static_cast<double>(logits[t]);
    return std::isinf(max_l) ? (l == max_l ? 1.0 : 0.0) : std::exp((l - max_l) * inv_t);
  };
  std::vector<double> w(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    w[i] = weight(ids[i]);
    total += w[i];
  }
  size_t keep = ids.size();
  if (params.top_p < 1.0f) {
    // The smallest prefix of the tokens by probability that reaches top_p of the
    // mass. It is usually a few tokens, so sort only the best m (m = 256, then 8x as
    // many while the prefix falls short) instead of the whole vocabulary.
    const double target = std::max(0.0, static_cast<double>(params.top_p)) * total;
    const bool sorted = params.top_k > 0;  // top-k sorted its ids above
    for (size_t m = std::min<size_t>(256, ids.size());; m = std::min(ids.size(), m * 8)) {
      if (!sorted) {
        if (m < ids.size()) std::nth_element(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(m), ids.end(), by_logit);
        std::sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(m), by_logit);
      }
      double cum = 0;
      keep = 0;
      for (size_t i = 0; i < m && keep == 0; ++i) {
        w[i] = weight(ids[i]);
        cum += w[i];
        if (cum >= target) keep = i + 1;
      }
      if (keep > 0) break;
      if (m == ids.size()) {
        keep = m;  // rounding left the whole sum a hair short of the target
        break;
      }
    }
    total = std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  d.token.reserve(keep);
  d.prob.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    const float p = static_cast<float>(w[i] / total);
    if (p > 0.0f) {
      d.token.push_back(ids[i]);
      d.prob.push_back(p);
    }
  }
  return d;
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = SplitMix64(x);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

Token SampleToken(const Distribution& dist, Rng& rng) {
  if (dist.token.empty()) throw std::invalid_argument("SampleToken: empty distribution");
  double total = 0;
  for (float p : dist.prob) total += p;
  const double u = rng.Uniform() * total;
  double cum = 0;
  Token last = dist.token.back();
  for (size_t i = 0; i < dist.token.size(); ++i) {
    if (dist.prob[i] <= 0.0f) continue;
    cum += dist.prob[i];
    last = dist.token[i];
    if (u < cum) return dist.token[i];
  }
  return last;  // rounding: u landed on the total
}

}  // namespace graft
