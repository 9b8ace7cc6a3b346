#include "engine/cost_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace graft {
namespace {

// A curve shaped like the measured CPU one: 16 rows (a full kernel block) cost less
// than 15.
std::vector<double> CpuCurve() {
  std::vector<double> ms = {0};
  for (int n = 1; n <= 16; ++n) ms.push_back(30.0 + 10.0 * (n - 1));
  ms[16] = 150.0;  // < ms[15] = 170
  return ms;
}

TEST(CostModelTest, ReadsTheCurveAndExtrapolatesPastIt) {
  CostModel m({0, 30.0, 45.0, 60.0, 70.0, 80.0, 90.0}, {});
  EXPECT_DOUBLE_EQ(m.VerifyMs(1), 30.0);
  EXPECT_DOUBLE_EQ(m.VerifyMs(0), 30.0);  // clamped to one row
  EXPECT_DOUBLE_EQ(m.VerifyMs(6), 90.0);
  EXPECT_DOUBLE_EQ(m.VerifyMs(8), 90.0 + 2 * (90.0 - 45.0) / 4);  // mean slope of the last 4 sizes
  EXPECT_DOUBLE_EQ(m.DraftMs(3), 0.0);  // no draft curve
  CostModel d({0, 30.0}, {0, 10.0, 12.0});
  EXPECT_DOUBLE_EQ(d.DraftMs(2), 12.0);
  EXPECT_DOUBLE_EQ(d.VerifyMs(4), 30.0 + 3 * 30.0);  // one size: its own value as slope
}

TEST(CostModelTest, RejectsEmptyOrNonPositiveCurves) {
  EXPECT_ANY_THROW(CostModel({0}, {}));
  EXPECT_ANY_THROW(CostModel({0, 30.0, 0.0}, {}));
  EXPECT_ANY_THROW(CostModel({0, 30.0}, {0, -1.0}));
}

TEST(CostModelTest, BestSizeMaximisesTokensPerMs) {
  CostModel m(CpuCurve(), {});
  // Nothing confident: verify the root alone.
  std::vector<double> weak = {0.2, 0.1, 0.05};
  EXPECT_EQ(m.BestSize(weak, 0.0, 16), 1);
  // A confident retrieved chain of 7 is worth verifying whole.
  std::vector<double> strong = {0.95, 0.9, 0.86, 0.82, 0.78, 0.74, 0.7, 0.3};
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

TEST(CostModelTest, NeverStopsJustShortOfAFullRowBlock) {
  CostModel m(CpuCurve(), {});
  // 15 candidates that pay at 15 rows: 16 rows cost less, so the 16th is free.
  std::vector<double> a(15, 0.9);
  EXPECT_EQ(m.BestSize(a, 0.0, 16), 16);
  // And with only 14 candidates the answer is 15 rows at most: there is nothing to
  // fill the block with.
  a.resize(14);
  EXPECT_EQ(m.BestSize(a, 0.0, 16), 15);
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
}

TEST(DraftGateTest, SameObservationsGiveSameDecisions) {
  DraftGate a, b;
  for (int step = 0; step < 100; ++step) {
    const bool da = a.ShouldDraft(), db = b.ShouldDraft();
    ASSERT_EQ(da, db) << "step " << step;
    const int32_t tokens = 1 + (step * 7) % 3;
    a.Observe(da, tokens, da ? 60.0 : 30.0);
    b.Observe(db, tokens, db ? 60.0 : 30.0);
  }
}

}  // namespace
}  // namespace graft
