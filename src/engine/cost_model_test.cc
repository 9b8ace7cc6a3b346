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

// Under load (other requests' rows and tokens in the same pass) the size maximises
// the whole pass's tokens per ms, so a tree worth its rows alone shrinks as the pass fills.
TEST(CostModelTest, BestSizeUnderLoadMaximisesThePassRate) {
  std::vector<double> linear = {0};
  for (int n = 1; n <= 32; ++n) linear.push_back(30.0 + 10.0 * (n - 1));
  CostModel m(linear, {});
  const std::vector<double> a = {0.9, 0.8, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1};
  const int32_t alone = m.BestSize(a, 0.0, 16);
  EXPECT_GT(alone, 1);
  int32_t prev = alone;
  for (int32_t others = 1; others <= 12; ++others) {
    const BatchLoad load{others, static_cast<double>(others)};
    const int32_t got = m.BestSize(a, 0.0, 16, load);
    double best = 0, gain = load.tokens + 1;
    int32_t want = 1;
    for (int32_t n = 1; n <= 9; ++n) {
      if (n > 1) gain += a[n - 2];
      const double r = gain / m.VerifyMs(load.rows + n);
      if (r > best) { best = r; want = n; }
    }
    EXPECT_EQ(got, want) << others << " other rows";
    prev = got;
  }
  EXPECT_LT(prev, alone) << "twelve other roots in the pass must shrink the tree";
  EXPECT_EQ(m.BestSize(a, 0.0, 16, {}), alone);
  // Padding to a full row block counts the other rows: 15 + 1 rows cost less than 15.
  CostModel block(CpuCurve(), {});
  EXPECT_EQ(block.CheapestSizeFrom(14, 16, 1), 15);
  EXPECT_EQ(block.CheapestSizeFrom(14, 16, 0), 16);
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

TEST(CostModelTest, CheapestSizeFromPadsToAFullRowBlock) {
  CostModel m(CpuCurve(), {});
  EXPECT_EQ(m.CheapestSizeFrom(15, 16), 16);  // 16 rows cost less than 15
  EXPECT_EQ(m.CheapestSizeFrom(15, 15), 15);  // unless 16 is over the limit
  EXPECT_EQ(m.CheapestSizeFrom(3, 16), 3);    // the curve rises from 3 until 16: 3 is cheapest
  EXPECT_EQ(m.CheapestSizeFrom(0, 16), 1);
}

// The default pair as measured on a 2-core Xeon (graft tune): a draft level costs
// about half a target token, two target rows 1.47x one.
CostModel XeonPair() {
  return CostModel({0, 71.1, 104.2, 132.9, 113.3, 143.4, 174.3, 198.6, 206.9},
                   {0, 38.5, 50.1, 61.2, 67.4, 95.2, 106.6, 118.6, 116.4});
}

// A GPU-like pair: a pass costs the same up to 8 rows and a draft level a tenth of it.
CostModel FlatPair() { return CostModel(std::vector<double>(9, 10.0), std::vector<double>(9, 1.0)); }

TEST(DraftGateTest, DraftRateIsTheBestChainDepthUnderTheCurves) {
  const CostModel c = FlatPair();
  // alpha 0.5, depth 1: 1.5 tokens in 1 + 10 ms; depth 2: 1.75 in 12 (the best);
  // depth 3: 1.875 in 13.
  EXPECT_NEAR(DraftGate::DraftRate(c, 0.5, 1, 1), 1.5 / 11, 1e-12);
  EXPECT_NEAR(DraftGate::DraftRate(c, 0.5, 3, 1), 1.75 / 12, 1e-12);
  EXPECT_NEAR(DraftGate::DraftRate(c, 1.0, 4, 1), 5.0 / 14, 1e-12);
}

TEST(DraftGateTest, NeverDraftsWhereEvenAGoodDraftCannotPay) {
  const CostModel c = XeonPair();
  // Even at the exploration ceiling (0.9 per level) a draft step loses to a 1-row pass.
  ASSERT_LT(DraftGate::DraftRate(c, 0.9, 6, 4), 1.0 / 71.1);
  DraftGate g;
  for (int step = 0; step < 2000; ++step) {
    ASSERT_FALSE(g.ShouldDraft(c, 6, 4, step == 0 ? 300 : 1 + step % 5, 128)) << "step " << step;
    g.ObserveRetrieval(1, 71.1);
  }
}

TEST(DraftGateTest, DraftsFromTheFirstStepWhereItPaysAndStopsWhenRejected) {
  const CostModel c = FlatPair();
  DraftGate g;
  ASSERT_TRUE(g.ShouldDraft(c, 6, 1, 1, 128));
  int drafts = 0, last_draft = 0;
  for (int step = 1; step <= 4000; ++step) {
    if (g.ShouldDraft(c, 6, 1, 1, 128)) {
      ++drafts;
      last_draft = step;
      g.ObserveDraft(1, 0);  // the draft is never right
    } else {
      g.ObserveRetrieval(1, 10.0);
    }
  }
  // Here a draft breaks even at ~10% per level: it drafts until the optimistic prior
  // (0.8, 4 levels) has faded below that (~60 observed levels), then only explores
  // at steps 32, 64, 128, ...: about log2(4000 / 32) = 7 more, none since step 2048.
  EXPECT_LT(g.Accept(), 0.1);
  EXPECT_LE(drafts, 80);
  EXPECT_GT(drafts, 40);
  EXPECT_LT(last_draft, 2100);
}

TEST(DraftGateTest, TheDraftsCatchUpMustBePaidByTheTokensLeft) {
  const CostModel c = FlatPair();
  DraftGate g;
  // 10000 prompt tokens to prefill (~1250 ms modelled) for 2 tokens left: no.
  EXPECT_FALSE(g.ShouldDraft(c, 6, 1, 10000, 2));
  // The same catch-up with 4000 tokens left: yes.
  EXPECT_TRUE(g.ShouldDraft(c, 6, 1, 10000, 4000));
  EXPECT_DOUBLE_EQ(c.DraftCatchUpMs(1), 0.0);
  EXPECT_DOUBLE_EQ(c.DraftCatchUpMs(8), 0.0);  // flat curve: 8 rows cost one pass
  EXPECT_DOUBLE_EQ(c.DraftCatchUpMs(80), 9.0);  // 80 rows at 1/8 ms each, less the pass
}

TEST(DraftGateTest, FollowsTheRetrievalArmWhenItDeliversMore) {
  const CostModel c = FlatPair();
  DraftGate g;
  // Retrieval delivers 8 tokens per 10 ms pass: more than any draft could.
  for (int i = 0; i < 5; ++i) g.ObserveRetrieval(8, 10.0);
  EXPECT_FALSE(g.ShouldDraft(c, 6, 1, 1, 128));
}

TEST(DraftGateTest, SameObservationsGiveSameDecisions) {
  const CostModel c = FlatPair();
  DraftGate a, b;
  for (int step = 0; step < 300; ++step) {
    const bool da = a.ShouldDraft(c, 6, 1, 1, 128), db = b.ShouldDraft(c, 6, 1, 1, 128);
    ASSERT_EQ(da, db) << "step " << step;
    const int32_t accepted = (step * 7) % 3;
    if (da) {
      a.ObserveDraft(3, accepted);
      b.ObserveDraft(3, accepted);
    } else {
      a.ObserveRetrieval(1 + accepted, 10.0);
      b.ObserveRetrieval(1 + accepted, 10.0);
    }
  }
}

}  // namespace
}  // namespace graft
