// Tests for MakeDistribution, Argmax, Rng, SampleToken and PositionSampler.
#include "graft/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <algorithm>
#include <stdexcept>
#include <vector>

namespace graft {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

double Sum(const Distribution& d) { return std::accumulate(d.prob.begin(), d.prob.end(), 0.0); }

TEST(SamplingTest, ArgmaxTiesToLowestId) {
  const std::vector<float> l = {1, 3, 2, 3, -kInf};
  EXPECT_EQ(Argmax(l.data(), 5), 1);
  const std::vector<float> n = {std::nanf(""), 0.5f, 0.5f};
  EXPECT_EQ(Argmax(n.data(), 3), 1);
  EXPECT_THROW(Argmax(l.data(), 0), std::invalid_argument);
}

TEST(SamplingTest, GreedyIsPointMass) {
  const std::vector<float> l = {0.1f, 2.0f, 2.0f, -1.0f};
  SamplingParams p;
  p.temperature = 0;
  p.top_k = 1;  // ignored
  const Distribution d = MakeDistribution(l, p);
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.token[0], 1);
  EXPECT_EQ(d.prob[0], 1.0f);
  EXPECT_EQ(d.Mode(), 1);
  EXPECT_EQ(d.Prob(2), 0.0f);
}

TEST(SamplingTest, TemperatureSoftmaxMatchesFormula) {
  const std::vector<float> l = {0.0f, 1.0f, -0.5f, 2.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  const Distribution d = MakeDistribution(l, p);
  ASSERT_EQ(d.size(), 4);
  double z = 0;
  for (float x : l) z += std::exp(x / 0.7);
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(d.Prob(v), std::exp(l[v] / 0.7) / z, 1e-6);
  EXPECT_NEAR(Sum(d), 1.0, 1e-6);
  EXPECT_EQ(d.token, (std::vector<Token>{0, 1, 2, 3}));  // no cut: token order
}

TEST(SamplingTest, TopKKeepsHighestWithLowIdTies) {
  const std::vector<float> l = {1.0f, 5.0f, 3.0f, 3.0f, 3.0f, 0.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  const Distribution d = MakeDistribution(l, p);
  EXPECT_EQ(d.token, (std::vector<Token>{1, 2, 3}));
  EXPECT_NEAR(Sum(d), 1.0, 1e-6);
  const double z = std::exp(5.0) + 2 * std::exp(3.0);
  EXPECT_NEAR(d.prob[0], std::exp(5.0) / z, 1e-6);
  p.top_k = 100;  // larger than the vocabulary: keeps all, in token order
  const Distribution all = MakeDistribution(l, p);
  EXPECT_EQ(all.token, (std::vector<Token>{0, 1, 2, 3, 4, 5}));
  p.top_k = 6;  // as many as there are: no cut either
  EXPECT_EQ(MakeDistribution(l, p).token, all.token);
}

TEST(SamplingTest, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (logits are log2-spaced at T = 1).
  const std::vector<float> l = {std::log(0.125f), std::log(0.5f), std::log(0.25f), std::log(0.125f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;
  Distribution d = MakeDistribution(l, p);
  EXPECT_EQ(d.token, (std::vector<Token>{1, 2}));
  EXPECT_NEAR(d.prob[0], 2.0 / 3.0, 1e-6);
  p.top_p = 0.45f;  // reached by the first token alone
  d = MakeDistribution(l, p);
  EXPECT_EQ(d.token, (std::vector<Token>{1}));
  p.top_p = 0.0f;  // at least one token
  EXPECT_EQ(MakeDistribution(l, p).size(), 1);
  p.top_p = 0.8f;  // needs a third token: the tie at 0.125 goes to the lower id
  d = MakeDistribution(l, p);
  EXPECT_EQ(d.token, (std::vector<Token>{1, 2, 0}));
}

// Top-p sorts only a growing prefix of the vocabulary (256, then 8x as many): on rows
// whose nucleus needs a few tokens, hundreds or thousands of them it keeps what a full
// sort keeps, in the same order. (The weights are floats within 1e-6 of e^x, so a
// top_p within about 1e-6 of 1 may keep a few tokens more or fewer than exact math.)
TEST(SamplingTest, TopPOnALargeVocabularyMatchesAFullSort) {
  std::mt19937 rng(5);
  for (float spread : {0.05f, 1.0f, 8.0f}) {
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> l(5000);
    for (float& x : l) x = std::round(normal(rng) * 64.0f) / 64.0f;  // many ties
    l[17] = -kInf;
    for (float top_p : {0.01f, 0.3f, 0.9f, 0.999f, 0.9999f}) {
      SamplingParams p;
      p.temperature = 0.7f;
      p.top_p = top_p;
      const Distribution d = MakeDistribution(l, p);
      std::vector<Token> order;
      for (Token t = 0; t < 5000; ++t) {
        if (t != 17) order.push_back(t);
      }
      std::sort(order.begin(), order.end(), [&](Token a, Token b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
      std::vector<double> w;
      double total = 0;
      for (Token t : order) total += w.emplace_back(std::exp((l[t] - l[order[0]]) / 0.7));
      size_t keep = 0;
      for (double cum = 0; keep < order.size() && cum < top_p * total;) cum += w[keep++];
      SCOPED_TRACE(testing::Message() << "spread " << spread << " top_p " << top_p << " keeps " << keep);
      ASSERT_EQ(d.size(), keep);
      EXPECT_TRUE(std::equal(d.token.begin(), d.token.end(), order.begin()));
      const double kept = std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
      for (size_t i = 0; i < keep; i += 97) EXPECT_NEAR(d.prob[i], w[i] / kept, 1e-6);
    }
  }
}

TEST(SamplingTest, TopKThenTemperatureThenTopP) {
  const std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f, 4.0f};
  SamplingParams p;
  p.temperature = 2.0f;
  p.top_k = 3;    // {4, 0, 1}
  p.top_p = 0.8f; // softmax at T = 2 over {4, 2, 1}: 0.6285, 0.2312, 0.1402 -> keep two
  const Distribution d = MakeDistribution(l, p);
  EXPECT_EQ(d.token, (std::vector<Token>{4, 0}));
  const double a = std::exp(2.0), b = std::exp(1.0);
  EXPECT_NEAR(d.prob[0], a / (a + b), 1e-6);
}

TEST(SamplingTest, MaskedLogits) {
  const std::vector<float> l = {-kInf, 0.0f, -kInf, std::nanf("")};
  SamplingParams p;
  p.temperature = 1.0f;
  const Distribution d = MakeDistribution(l, p);
  EXPECT_EQ(d.token, (std::vector<Token>{1}));
  const std::vector<float> none = {-kInf, -kInf};
  EXPECT_THROW(MakeDistribution(none, p), std::invalid_argument);
  p.temperature = 0;
  EXPECT_THROW(MakeDistribution(none, p), std::invalid_argument);
}

TEST(SamplingTest, RngIsDeterministic) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
  Rng r(1);
  for (int i = 0; i < 10000; ++i) {
    const double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(SamplingTest, SampleTokenFollowsDistribution) {
  Distribution d;
  d.token = {7, 3, 5, 1};
  d.prob = {0.1f, 0.2f, 0.3f, 0.4f};
  Rng rng(2025);
  const int n = 40000;
  std::vector<int> count(8, 0);
  for (int i = 0; i < n; ++i) ++count[SampleToken(d, rng)];
  double chi2 = 0;
  for (int i = 0; i < d.size(); ++i) {
    const double e = n * d.prob[i];
    chi2 += (count[d.token[i]] - e) * (count[d.token[i]] - e) / e;
  }
  EXPECT_LT(chi2, 21.1);  // df = 3, p = 1e-4
  EXPECT_EQ(count[0] + count[2] + count[4] + count[6], 0);
  EXPECT_THROW(SampleToken(Distribution{}, rng), std::invalid_argument);
}

// The inverse CDF walks token ids in increasing order whatever the stored order, so a
// top-p distribution (stored by probability) and the same entries in id order give the
// same token for every u.
TEST(SamplingTest, SampleTokenWalksTokenIds) {
  Distribution d;
  d.token = {7, 3, 5, 1};
  d.prob = {0.1f, 0.2f, 0.3f, 0.4f};
  // In id order: 1 [0, .4), 3 [.4, .6), 5 [.6, .9), 7 [.9, 1).
  EXPECT_EQ(SampleToken(d, 0.0), 1);
  EXPECT_EQ(SampleToken(d, 0.39), 1);
  EXPECT_EQ(SampleToken(d, 0.41), 3);
  EXPECT_EQ(SampleToken(d, 0.61), 5);
  EXPECT_EQ(SampleToken(d, 0.91), 7);
  EXPECT_EQ(SampleToken(d, std::nextafter(1.0, 0.0)), 7);
  Distribution sorted;
  sorted.token = {1, 3, 5, 7};
  sorted.prob = {0.4f, 0.2f, 0.3f, 0.1f};
  for (double u = 0; u < 1; u += 1.0 / 1024) EXPECT_EQ(SampleToken(d, u), SampleToken(sorted, u)) << u;
  // A zero entry is never drawn, even at its boundary.
  Distribution z;
  z.token = {0, 1, 2};
  z.prob = {0.5f, 0.0f, 0.5f};
  EXPECT_EQ(SampleToken(z, 0.5), 2);
  EXPECT_THROW(SampleToken(Distribution{}, 0.5), std::invalid_argument);
  // A top-p distribution from logits, whatever its stored order.
  const std::vector<float> l = {0.1f, 2.0f, 1.5f, -1.0f, 1.9f};
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  const Distribution cut = MakeDistribution(l, p);
  ASSERT_FALSE(std::is_sorted(cut.token.begin(), cut.token.end()));
  Distribution by_id = cut;
  std::vector<size_t> idx(cut.token.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return cut.token[a] < cut.token[b]; });
  for (size_t i = 0; i < idx.size(); ++i) by_id.token[i] = cut.token[idx[i]], by_id.prob[i] = cut.prob[idx[i]];
  for (double u = 0; u < 1; u += 1.0 / 4096) ASSERT_EQ(SampleToken(cut, u), SampleToken(by_id, u)) << u;
}

// The uniform of a position depends on (seed, stream, position) alone, and looks
// uniform and independent across positions and seeds.
TEST(SamplingTest, PositionSamplerIsKeyedAndUniform) {
  const PositionSampler a(SamplingParams{.seed = 7}), b(SamplingParams{.seed = 7});
  const PositionSampler other_seed(SamplingParams{.seed = 8}), other_stream(SamplingParams{.seed = 7, .stream = 1});
  int same_seed = 0, same_stream = 0;
  for (int64_t t = 0; t < 1000; ++t) {
    ASSERT_EQ(a.Uniform(t), b.Uniform(t));
    same_seed += a.Uniform(t) == other_seed.Uniform(t);
    same_stream += a.Uniform(t) == other_stream.Uniform(t);
  }
  EXPECT_EQ(same_seed, 0);
  EXPECT_EQ(same_stream, 0);
  // Uniform over 16 bins, and pairs (t, t + 1) uniform over 16 x 16 cells, over seeds
  // 0..n-1 (a counter-based hash of small consecutive keys must not show them).
  constexpr int kBins = 16, kN = 64000;
  std::vector<int> bins(kBins, 0), pairs(kBins * kBins, 0);
  for (int i = 0; i < kN; ++i) {
    const PositionSampler s(SamplingParams{.seed = static_cast<uint64_t>(i / 8)});
    const int64_t t = i % 8;
    const double u = s.Uniform(t), v = s.Uniform(t + 1);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++bins[static_cast<int>(u * kBins)];
    ++pairs[static_cast<int>(u * kBins) * kBins + static_cast<int>(v * kBins)];
  }
  double chi_bins = 0, chi_pairs = 0;
  for (int c : bins) chi_bins += (c - kN / double(kBins)) * (c - kN / double(kBins)) / (kN / double(kBins));
  const double e = kN / double(kBins * kBins);
  for (int c : pairs) chi_pairs += (c - e) * (c - e) / e;
  EXPECT_LT(chi_bins, 44.3);    // df 15, p = 1e-4
  EXPECT_LT(chi_pairs, 341.0);  // df 255, p = 1e-4 (Wilson-Hilferty)
  // Draws by id-order inverse CDF follow the distribution.
  Distribution d;
  d.token = {7, 3, 5, 1};
  d.prob = {0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<int> count(8, 0);
  for (int i = 0; i < 40000; ++i) ++count[PositionSampler(SamplingParams{.seed = 3}).Sample(d, i)];
  double chi2 = 0;
  for (int i = 0; i < d.size(); ++i) {
    const double ex = 40000 * d.prob[i];
    chi2 += (count[d.token[i]] - ex) * (count[d.token[i]] - ex) / ex;
  }
  EXPECT_LT(chi2, 21.1);  // df = 3, p = 1e-4
}

TEST(SamplingTest, FreshSeedsDifferAndFitADouble) {
  const uint64_t a = FreshSeed(), b = FreshSeed();
  EXPECT_NE(a, b);
  EXPECT_LT(a, uint64_t{1} << 53);
  EXPECT_LT(b, uint64_t{1} << 53);
}

}  // namespace
}  // namespace graft
