// Sampling: logits -> Distribution (top-k, temperature softmax, top-p), Rng,
// SampleToken, PositionSampler.
#include "graft/sampling.h"

#include "logit_scan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

namespace graft {
namespace {

// splitmix64's finaliser: a bijection of 64 bits whose every output bit depends on
// every input bit.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64(uint64_t& x) { return Mix64(x += 0x9e3779b97f4a7c15ULL); }

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

float Finite(float l) {
  return std::isnan(l) ? -std::numeric_limits<float>::infinity() : l;
}

// A token that can be sampled: a finite or +inf logit.
bool Candidate(float l) { return Finite(l) > -std::numeric_limits<float>::infinity(); }

// The nucleus of n candidates ranked best first: the shortest prefix whose weights
// (weight(i) of the i-th) reach `target`, at least one (all n when rounding leaves
// their sum short of it); `*mass` = the prefix's weight.
template <typename Weight>
size_t NucleusSize(size_t n, double target, const Weight& weight, double* mass) {
  double cum = 0;
  size_t keep = 0;
  while (keep < n && (keep == 0 || cum < target)) cum += weight(keep++);
  *mass = cum;
  return keep;
}

// Appends t with probability p, unless p rounds to 0 in float.
void Add(Distribution* d, Token t, double p) {
  const float f = static_cast<float>(p);
  if (f > 0.0f) {
    d->token.push_back(t);
    d->prob.push_back(f);
  }
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
    if (!Candidate(logits[t])) throw std::invalid_argument("MakeDistribution: no finite logit");
    d.token.push_back(t);
    d.prob.push_back(1.0f);
    return d;
  }
  const float mx = MaxLogit(logits, n_vocab);  // NaN ignored
  if (!(mx > -std::numeric_limits<float>::infinity())) {
    throw std::invalid_argument("MakeDistribution: no finite logit");
  }
  auto by_logit = [&](Token a, Token b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  const double target_p = std::max(0.0, static_cast<double>(params.top_p));

  if (params.top_k <= 0 && !std::isinf(mx)) {
    // The whole vocabulary: weights 8 lanes at a time in float (within 1e-6 of e^x;
    // a weight under e^-87 of the largest is 0), their sum in double.
    std::vector<float> w(static_cast<size_t>(n_vocab));
    const double total = SoftmaxWeights(logits, n_vocab, mx, static_cast<float>(inv_t), w.data());
    if (params.top_p >= 1.0f) {
      d.token.reserve(static_cast<size_t>(n_vocab));
      d.prob.reserve(static_cast<size_t>(n_vocab));
      for (int32_t v = 0; v < n_vocab; ++v) Add(&d, v, w[static_cast<size_t>(v)] / total);
      return d;
    }
    // Top-p: the nucleus is usually a few tokens, so only the tokens above a floor
    // `span` below the best logit are gathered and sorted: 4 T, then twice as far while
    // they fall short, up to 64 T (a weight of e^-64), then every candidate. Every
    // token left out ranks below every one gathered, so the nucleus of what is gathered
    // is the nucleus of the row once it reaches top_p.
    const double target = target_p * total;
    std::vector<Token> ids;
    size_t keep = 0;
    double mass = 0;
    for (int round = 0;; ++round) {
      const bool all = round == 5;
      // Strictly below the best logit even where the span vanishes beside it (a tiny
      // T); FirstAbove's strict > leaves out NaN and -inf at any floor.
      const float floor = all ? -std::numeric_limits<float>::infinity()
                              : std::min(mx - std::ldexp(4.0f * params.temperature, round),
                                         std::nextafter(mx, -std::numeric_limits<float>::infinity()));
      ids.clear();
      for (int32_t v = FirstAbove(logits, 0, n_vocab, floor); v < n_vocab; v = FirstAbove(logits, v + 1, n_vocab, floor)) {
        ids.push_back(v);
      }
      std::sort(ids.begin(), ids.end(), by_logit);
      keep = NucleusSize(ids.size(), target, [&](size_t i) { return w[static_cast<size_t>(ids[i])]; }, &mass);
      if (mass >= target || all) break;
    }
    for (size_t i = 0; i < keep; ++i) Add(&d, ids[i], w[static_cast<size_t>(ids[i])] / mass);
    return d;
  }

  // Top-k, or a +inf logit: few candidates, weights one by one in double.
  std::vector<Token> ids;  // candidates, by logit when cut
  bool cut = params.top_p < 1.0f;
  if (params.top_k > 0) {
    // One more than k: whether top-k cuts anything.
    std::vector<std::pair<float, Token>> best;
    TopKLogits(logits, n_vocab, std::min(params.top_k, n_vocab) + 1, &best);
    if (static_cast<int64_t>(best.size()) > params.top_k) {
      best.resize(static_cast<size_t>(params.top_k));
      cut = true;
    }
    for (const auto& b : best) ids.push_back(b.second);
    if (!cut) std::sort(ids.begin(), ids.end());  // token order
  } else {
    for (int32_t v = 0; v < n_vocab; ++v) {
      if (Candidate(logits[v])) ids.push_back(v);
    }
    if (cut) std::sort(ids.begin(), ids.end(), by_logit);
  }
  std::vector<double> w(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double l = static_cast<double>(logits[ids[i]]);
    w[i] = std::isinf(mx) ? (l == mx ? 1.0 : 0.0) : std::exp((l - mx) * inv_t);
    total += w[i];
  }
  size_t keep = ids.size();
  if (params.top_p < 1.0f) {  // ids are sorted by logit, hence by probability
    keep = NucleusSize(ids.size(), target_p * total, [&](size_t i) { return w[i]; }, &total);
  }
  for (size_t i = 0; i < keep; ++i) Add(&d, ids[i], w[i] / total);
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

Token SampleToken(const Distribution& dist, double u) {
  const size_t m = dist.token.size();
  if (m == 0) throw std::invalid_argument("SampleToken: empty distribution");
  // Entries in id order: as stored when nothing was cut (the whole row), else a small
  // nucleus / top-k set sorted here.
  std::vector<uint32_t> order;
  if (!std::is_sorted(dist.token.begin(), dist.token.end())) {
    order.resize(m);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return dist.token[a] < dist.token[b]; });
  }
  const auto at = [&](size_t i) { return order.empty() ? i : static_cast<size_t>(order[i]); };
  double total = 0;
  for (size_t i = 0; i < m; ++i) total += dist.prob[at(i)];
  const double target = u * total;
  double cum = 0;
  Token last = kNoToken;
  for (size_t i = 0; i < m; ++i) {
    const size_t k = at(i);
    if (dist.prob[k] <= 0.0f) continue;
    cum += dist.prob[k];
    last = dist.token[k];
    if (target < cum) return last;
  }
  // Rounding: u landed on the total. (kNoToken only if every entry is 0: none is.)
  return last != kNoToken ? last : dist.token[at(m - 1)];
}

Token SampleToken(const Distribution& dist, Rng& rng) { return SampleToken(dist, rng.Uniform()); }

double PositionSampler::Uniform(int64_t position) const {
  // Three rounds, one per key, each mixed before the next is added: (seed, stream, t)
  // and (seed', stream', t') collide only as 64-bit hashes do. Not a stream cipher:
  // reproducible draws, not secret ones.
  uint64_t h = Mix64(seed_ + 0x9e3779b97f4a7c15ULL);
  h = Mix64(h ^ (stream_ + 0x632be59bd9b4e019ULL));
  h = Mix64(h ^ (static_cast<uint64_t>(position) + 0xd1b54a32d192ed03ULL));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

uint64_t FreshSeed() {
  std::random_device rd;
  const uint64_t hi = rd(), lo = rd();
  return ((hi << 32) ^ lo) & ((uint64_t{1} << 53) - 1);
}

}  // namespace graft
