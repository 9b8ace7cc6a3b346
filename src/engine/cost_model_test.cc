#include "engine/cost_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace graft {
namespace {

TEST(CostModelTest, InterpolatesAndExtrapolatesTheMeasuredCurve) {
  CostModel m(32);
  m.SetVerifyCurve({{4, 80.0}, {1, 30.0}, {8, 130.0}, {16, 155.0}});
  EXPECT_TRUE(m.calibrated());
  EXPECT_DOUBLE_EQ(m.VerifyMs(1), 30.0);
  EXPECT_DOUBLE_EQ(m.VerifyMs(4), 80.0);
  EXPECT_NEAR(m.VerifyMs(2), 30.0 + 50.0 / 3, 1e-9);
  EXPECT_NEAR(m.VerifyMs(12), 142.5, 1e-9);
  EXPECT_NEAR(m.VerifyMs(32), 155.0 + 25.0 / 8 * 16, 1e-9);  // slope of the last segment
  EXPECT_DOUBLE_EQ(m.VerifyMs(100), m.VerifyMs(32));         // clamped to max_tree
}

TEST(CostModelTest, ObservationsMoveTheCurve) {
  CostModel m(8);
  m.SetVerifyCurve({{1, 30.0}, {8, 130.0}});
  for (int i = 0; i < 50; ++i) m.ObserveVerify(8, 60.0);
  EXPECT_NEAR(m.VerifyMs(8), 60.0, 0.1);
  m.ObserveVerify(0, 1.0);   // out of range: ignored
  m.ObserveVerify(3, -1.0);  // nonsense: ignored
  EXPECT_NEAR(m.VerifyMs(1), 30.0, 1e-9);
}

TEST(CostModelTest, BestSizeMaximisesTokensPerMs) {
  CostModel m(16);
  m.SetVerifyCurve({{1, 30.0}, {2, 47.0}, {4, 80.0}, {8, 130.0}, {16, 155.0}});
  // Nothing confident: verify the root alone.
  std::vector<double> weak = {0.2, 0.1, 0.05};
  EXPECT_EQ(m.BestSize(weak, 0.0, 16), 1);
  // A confident retrieved chain of 7 is worth verifying whole.
  std::vector<double> strong = {0.95, 0.9, 0.86, 0.82, 0.78, 0.74, 0.7};
  EXPECT_EQ(m.BestSize(strong, 0.0, 16), 8);
  // Brute force agrees on random inputs.
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> a;
    double x = 1.0;
    for (int i = 0; i < 15; ++i) a.push_back(x *= 0.5 + 0.5 * ((trial * 7 + i * 13) % 10) / 10.0);
    const double fixed = trial % 5 * 10.0;
    const int32_t got = m.BestSize(a, fixed, 16);
    double best = 0;
    int32_t want = 1;
    double gain = 1;
    for (int32_t n = 1; n <= 16; ++n) {
      if (n > 1) gain += a[n - 2];
      const double r = gain / (fixed + m.VerifyMs(n));
      if (r > best) { best = r; want = n; }
    }
    EXPECT_EQ(got, want);
  }
  // max_n caps the answer.
  EXPECT_LE(m.BestSize(strong, 0.0, 3), 3);
}

TEST(DraftGateTest, TriesBothThenFollowsTheFasterWithExploration) {
  DraftGate g(4);
  int drafts = 0;
  for (int step = 0; step < 200; ++step) {
    const bool d = g.ShouldDraft();
    drafts += d;
    // Drafting yields 2 tokens in 100 ms, not drafting 1 token in 30 ms.
    g.Observe(d, d ? 2 : 1, d ? 100.0 : 30.0);
  }
  EXPECT_GT(g.rate(false), g.rate(true));
  EXPECT_LT(drafts, 200 / 16 + 5);  // drafting is 70% slower: explored 1 step in 16
  EXPECT_GT(drafts, 2);            // but keeps exploring
  g.Reset();
  EXPECT_TRUE(g.ShouldDraft());
}

}  // namespace
}  // namespace graft
