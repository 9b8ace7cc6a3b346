// Tests for the vectorised logit scans (MaxLogit, FirstAbove, SumExpAbove) and the
// Argmax built on them: each against a scalar reference, on rows of every length
// around the vector width and with NaN, -inf and +inf in any lane.
#include "logit_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <limits>
#include <random>
#include <vector>

#include "graft/sampling.h"

namespace graft {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float ScalarMax(const std::vector<float>& l) {
  float m = -kInf;
  for (float x : l) m = x > m ? x : m;
  return m;
}

int32_t ScalarArgmax(const std::vector<float>& l) {
  int32_t best = 0;
  float best_l = std::isnan(l[0]) ? -kInf : l[0];
  for (int32_t v = 1; v < static_cast<int32_t>(l.size()); ++v) {
    const float x = std::isnan(l[v]) ? -kInf : l[v];
    if (x > best_l) best = v, best_l = x;
  }
  return best;
}

// Rows of n values drawn from a few repeated levels (so ties are common), with a
// special value (NaN, -inf, +inf) at some positions.
std::vector<float> Row(std::mt19937& rng, int32_t n, float special, int32_t specials) {
  std::vector<float> l(n);
  for (float& x : l) x = static_cast<float>(std::uniform_int_distribution<int>(-6, 6)(rng)) * 0.5f;
  for (int32_t k = 0; k < specials && n > 0; ++k) l[std::uniform_int_distribution<int32_t>(0, n - 1)(rng)] = special;
  return l;
}

TEST(LogitScanTest, MaxFirstAboveAndArgmaxMatchAScalarLoopOnEveryTail) {
  std::mt19937 rng(7);
  const float specials[] = {0.0f, std::nanf(""), -kInf, kInf};
  for (int32_t n = 1; n <= 40; ++n) {
    for (float special : specials) {
      for (int32_t count : {0, 1, 3, n}) {
        const std::vector<float> l = Row(rng, n, special, count);
        SCOPED_TRACE(testing::Message() << "n " << n << " special " << special << " count " << count);
        const float want = ScalarMax(l);
        const float got = MaxLogit(l.data(), n);
        EXPECT_TRUE(got == want || (std::isinf(got) && got == want)) << got << " vs " << want;
        EXPECT_EQ(Argmax(l.data(), n), ScalarArgmax(l));
        for (int32_t from = 0; from <= n; from += 3) {
          for (float t : {-1.0f, 0.0f, 2.5f, kInf}) {
            int32_t first = n;
            for (int32_t i = from; i < n; ++i) {
              if (l[i] > t) {
                first = i;
                break;
              }
            }
            EXPECT_EQ(FirstAbove(l.data(), from, n, t), first) << "from " << from << " t " << t;
          }
        }
      }
    }
  }
  EXPECT_EQ(MaxLogit(nullptr, 0), -kInf);
}

TEST(LogitScanTest, TopKLogitsIsTheBestKOfASortBestFirstTiesToTheLowerId) {
  std::mt19937 rng(11);
  const float specials[] = {0.0f, std::nanf(""), -kInf, kInf};
  std::vector<std::pair<float, Token>> got;
  for (int32_t n : {1, 2, 7, 8, 9, 31, 200}) {
    for (float special : specials) {
      const std::vector<float> l = Row(rng, n, special, std::max(1, n / 4));
      std::vector<std::pair<float, Token>> want;
      for (int32_t v = 0; v < n; ++v) {
        if (!std::isnan(l[v]) && l[v] > -kInf) want.push_back({l[v], v});
      }
      std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
      });
      for (int32_t k : {1, 3, 8, 40, n, n + 5}) {
        TopKLogits(l.data(), n, k, &got);
        const size_t m = std::min<size_t>(static_cast<size_t>(k), want.size());
        const std::vector<std::pair<float, Token>> best(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(m));
        EXPECT_EQ(got, best)
            << "n " << n << " special " << special << " k " << k;
      }
    }
  }
  TopKLogits(nullptr, 0, 4, &got);
  EXPECT_TRUE(got.empty());
}

TEST(LogitScanTest, ArgmaxOfRowsWithoutAFiniteValueIsTokenZero) {
  for (int32_t n : {1, 7, 8, 9, 33}) {
    std::vector<float> l(n, std::nanf(""));
    EXPECT_EQ(Argmax(l.data(), n), 0);
    for (int32_t i = 0; i < n; i += 2) l[i] = -kInf;
    EXPECT_EQ(Argmax(l.data(), n), 0);
  }
}

TEST(LogitScanTest, SumExpAboveIsWithinOneMillionthOfTheExactSum) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int32_t n : {1, 5, 8, 13, 64, 1000, 151936}) {
    std::vector<float> l(n);
    for (float& x : l) x = normal(rng);
    if (n > 2) l[n / 2] = std::nanf("");  // never counts
    const float mx = ScalarMax(l);
    for (float below : {0.5f, 20.0f, 80.0f}) {
      const float cut = mx - below;
      double want = 0;
      for (float x : l) {
        if (x > cut) want += std::exp(static_cast<double>(x) - mx);
      }
      const double got = SumExpAbove(l.data(), n, mx, cut);
      EXPECT_NEAR(got, want, want * 1e-6) << "n " << n << " cut mx - " << below;
    }
  }
  // Each term on its own: e^x over [-87, 0].
  for (float x = -87.0f; x <= 0.0f; x += 0.37f) {
    const float one[] = {x, 0.0f};
    EXPECT_NEAR(SumExpAbove(one, 1, 0.0f, -88.0f), std::exp(static_cast<double>(x)), std::exp(x) * 1e-6) << x;
  }
  const std::vector<float> none(19, -5.0f);  // below the cut: nothing, in lanes and tail
  EXPECT_EQ(SumExpAbove(none.data(), 19, 0.0f, -1.0f), 0.0f);
}

TEST(LogitScanTest, SoftmaxWeightsAreWithinOneMillionthAndZeroBelowTheFloor) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  for (int32_t n : {1, 7, 8, 9, 300, 5000}) {
    std::vector<float> l(n);
    for (float& x : l) x = normal(rng);
    if (n > 3) l[1] = std::nanf(""), l[2] = -kInf;
    const float mx = MaxLogit(l.data(), n);
    for (float inv_t : {0.5f, 1.0f, 4.0f}) {
      std::vector<float> w(n, -1.0f);
      const double total = SoftmaxWeights(l.data(), n, mx, inv_t, w.data());
      double want_total = 0;
      for (int32_t i = 0; i < n; ++i) {
        const double x = (l[i] - mx) * inv_t;  // the exponent in float, as the lanes take it
        const double want = std::isnan(x) || x < -87.0 ? 0.0 : std::exp(x);
        want_total += want;
        if (x < -86.9 && x > -87.1) continue;  // at the floor either may hold
        EXPECT_NEAR(w[i], want, want * 1e-6) << "n " << n << " i " << i << " x " << x;
      }
      EXPECT_NEAR(total, want_total, want_total * 1e-6) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace graft
