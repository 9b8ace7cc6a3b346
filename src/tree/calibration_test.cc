// Tests for Calibration and PathAcceptance.
#include "graft/calibration.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <random>

#include "graft/error.h"
#include "tree_test_util.h"

namespace graft {
namespace {

TEST(CalibrationTest, BucketsAreClamped) {
  EXPECT_EQ(Calibration::ConfBucket(0.0f), 0);
  EXPECT_EQ(Calibration::ConfBucket(0.05f), 0);
  EXPECT_EQ(Calibration::ConfBucket(0.35f), 3);
  EXPECT_EQ(Calibration::ConfBucket(1.0f), 9);
  EXPECT_EQ(Calibration::ConfBucket(7.0f), 9);
  EXPECT_EQ(Calibration::ConfBucket(-1.0f), 0);
  EXPECT_EQ(Calibration::ConfBucket(std::nanf("")), 0);
  EXPECT_EQ(Calibration::DepthBucket(0), 0);
  EXPECT_EQ(Calibration::DepthBucket(1), 0);
  EXPECT_EQ(Calibration::DepthBucket(7), 6);
  EXPECT_EQ(Calibration::DepthBucket(8), 7);
  EXPECT_EQ(Calibration::DepthBucket(100), 7);
}

TEST(CalibrationTest, StartsAtRawConfidence) {
  Calibration c;
  EXPECT_DOUBLE_EQ(c.Estimate(Source::kDraft, 0.37f, 3), static_cast<double>(0.37f));
  EXPECT_DOUBLE_EQ(c.Estimate(Source::kCorpus, 1.0f, 1), 1.0);
  EXPECT_DOUBLE_EQ(c.Estimate(Source::kRoot, 0.1f, 0), 1.0);
}

// A source whose short, common matches fail gets a low scale; with explore_strength
// that scale must not lock out its never-tried long matches (they would never be
// proposed, so never tested): an untried cell starts at its raw confidence and only
// its own trials move it.
TEST(CalibrationTest, UntriedCellsAreNotLockedOutByTheSourceScale) {
  const CalibrationOptions cautious{.source_scale_prior = 0.5};
  CalibrationOptions explore = cautious;
  explore.explore_strength = 2.0;
  Calibration plain(cautious), optimist(explore);
  for (Calibration* c : {&plain, &optimist}) {
    for (int i = 0; i < 200; ++i) c->Record(Source::kRequest, 0.5f, 1, i % 10 == 0);  // 10% of 0.5
  }
  // The tried cell follows its data either way.
  EXPECT_NEAR(plain.Estimate(Source::kRequest, 0.5f, 1), 0.1, 0.02);
  EXPECT_NEAR(optimist.Estimate(Source::kRequest, 0.5f, 1), 0.1, 0.02);
  // The untried 0.95 cell: scaled down to ~0.2 without exploration, its face value with.
  EXPECT_LT(plain.Estimate(Source::kRequest, 0.95f, 1), 0.25);
  EXPECT_NEAR(optimist.Estimate(Source::kRequest, 0.95f, 1), 0.95, 1e-6);
  // Its own failures bring it down like any other cell's.
  for (int i = 0; i < 20; ++i) optimist.Record(Source::kRequest, 0.95f, 1, false);
  EXPECT_LT(optimist.Estimate(Source::kRequest, 0.95f, 1), 0.1);
  // Its successes keep it up.
  Calibration good(explore);
  for (int i = 0; i < 200; ++i) good.Record(Source::kRequest, 0.5f, 1, false);
  for (int i = 0; i < 20; ++i) good.Record(Source::kRequest, 0.95f, 1, true);
  EXPECT_GT(good.Estimate(Source::kRequest, 0.95f, 1), 0.8);
  // A source that under-promises (scale > 1) is not held back by the optimism either.
  Calibration modest(explore);
  for (int i = 0; i < 50; ++i) modest.Record(Source::kRecycle, 0.3f, 1, true);
  EXPECT_GT(modest.Estimate(Source::kRecycle, 0.45f, 1), 0.45);
}

TEST(CalibrationTest, MovesTowardsObservedRate) {
  Calibration c;
  std::mt19937_64 rng(7);
  double prev = c.Estimate(Source::kRequest, 0.35f, 2);
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 100; ++i) {
      c.Record(Source::kRequest, 0.35f, 2, (rng() % 10) < 8);  // true rate 0.8
    }
    const double now = c.Estimate(Source::kRequest, 0.35f, 2);
    EXPECT_GT(now, prev - 0.03);
    prev = now;
  }
  EXPECT_NEAR(prev, 0.8, 0.05);
  EXPECT_DOUBLE_EQ(c.Trials(Source::kRequest, 0.35f, 2), 1000.0);
  EXPECT_DOUBLE_EQ(c.SourceTrials(Source::kRequest), 1000.0);
  // Other sources are untouched; other buckets of the same source move only by the
  // source's scale r = (2 + accepts) / (2 + sum of raw confidences).
  EXPECT_DOUBLE_EQ(c.Estimate(Source::kDraft, 0.35f, 2), static_cast<double>(0.35f));
  const double r = (2 + c.SourceAccepts(Source::kRequest)) / (2 + 1000 * static_cast<double>(0.35f));
  EXPECT_NEAR(c.Estimate(Source::kRequest, 0.15f, 2), std::min(1.0, 0.15f * r), 1e-9);
}

TEST(CalibrationTest, PriorStrengthIsFourPseudoCounts) {
  Calibration c;
  // Four observed rejections at p = 0.5: source scale r = 2 / (2 + 4 * 0.5) = 0.5, so
  // the prior centre is 0.25; coarse = (4 * 0.25 + 0) / 8 = 0.125; fine cell (same
  // depth) = (4 * 0.125 + 0) / 8 = 0.0625.
  for (int i = 0; i < 4; ++i) c.Record(Source::kDraft, 0.5f, 1, false);
  EXPECT_NEAR(c.Estimate(Source::kDraft, 0.5f, 1), 0.0625, 1e-12);
  // At an unobserved depth the fine cell backs off to the coarse cell.
  EXPECT_NEAR(c.Estimate(Source::kDraft, 0.5f, 4), 0.125, 1e-12);
  // An unobserved bucket of the same source starts at r * p.
  EXPECT_NEAR(c.Estimate(Source::kDraft, 0.9f, 1), 0.5 * static_cast<double>(0.9f), 1e-7);
}

TEST(CalibrationTest, SparseCellsBackOffToCoarse) {
  Calibration c;
  for (int i = 0; i < 200; ++i) {
    c.Record(Source::kDraft, 0.55f, 2, true);
    c.Record(Source::kDraft, 0.55f, 3, false);
  }
  EXPECT_GT(c.Estimate(Source::kDraft, 0.55f, 2), 0.95);
  EXPECT_LT(c.Estimate(Source::kDraft, 0.55f, 3), 0.05);
  // Depth 6 has no data: it takes the (source, bucket) rate, about 0.5.
  EXPECT_NEAR(c.Estimate(Source::kDraft, 0.55f, 6), 0.5, 0.02);
}

TEST(CalibrationTest, DecayAndClear) {
  Calibration c;
  for (int i = 0; i < 100; ++i) c.Record(Source::kPld, 0.95f, 1, false);
  const double before = c.Estimate(Source::kPld, 0.95f, 1);
  c.Decay(0.01);
  EXPECT_NEAR(c.Trials(Source::kPld, 0.95f, 1), 1.0, 1e-9);
  EXPECT_GT(c.Estimate(Source::kPld, 0.95f, 1), before);
  c.Clear();
  EXPECT_DOUBLE_EQ(c.Estimate(Source::kPld, 0.95f, 1), static_cast<double>(0.95f));
  EXPECT_DOUBLE_EQ(c.SourceTrials(Source::kPld), 0.0);
}

// At most one child of a node is accepted (siblings carry distinct tokens), so the
// children's edge estimates share one unit: each gets at most what the earlier ones left.
TEST(CalibrationTest, SiblingsShareOneUnitOfMass) {
  Calibration c;  // no data: estimates are the raw confidences
  TokenTree t;
  t.Reset(0);
  const int32_t x = t.Add(0, 1, 0.8f, Source::kRequest);
  const int32_t y = t.Add(0, 2, 0.8f, Source::kRecycle);
  const int32_t z = t.Add(0, 3, 0.5f, Source::kDraft);
  const int32_t w = t.Add(y, 4, 0.5f, Source::kRequest);
  const int32_t v = t.Add(x, 5, 0.5f, Source::kRequest);
  const auto a = PathAcceptance(t, c);
  EXPECT_NEAR(a[x], 0.8, 1e-6);
  EXPECT_NEAR(a[y], 0.2, 1e-6);
  EXPECT_NEAR(a[z], 0.0, 1e-6);
  EXPECT_NEAR(a[w], 0.1, 1e-6);
  EXPECT_NEAR(a[v], 0.4, 1e-6);
  EXPECT_NEAR(ExpectedAcceptedLength(t, c), 1.5, 1e-6);
}

// The likeliest first token's a, but only from a cell with enough outcomes behind it.
TEST(CalibrationTest, SureFirstAcceptanceNeedsTrialsBehindTheEstimate) {
  Calibration c;
  TokenTree t;
  t.Reset(0);
  const int32_t x = t.Add(0, 1, 0.04f, Source::kRequest);
  const int32_t y = t.Add(0, 2, 0.95f, Source::kRecycle);  // the likeliest, in a later slot
  t.Add(x, 3, 0.99f, Source::kRequest);                    // deeper nodes never count
  std::vector<double> a = PathAcceptance(t, c);
  EXPECT_EQ(SureFirstAcceptance(t, a, c, 0), a[y]);
  EXPECT_EQ(SureFirstAcceptance(t, a, c, 1), 0.0);  // no outcome yet in y's cell
  for (int i = 0; i < 3; ++i) c.Record(Source::kRecycle, 0.95f, 2, true);  // another depth: another cell
  for (int i = 0; i < 3; ++i) c.Record(Source::kRecycle, 0.95f, 1, true);
  a = PathAcceptance(t, c);
  EXPECT_EQ(SureFirstAcceptance(t, a, c, 4), 0.0);
  c.Record(Source::kRecycle, 0.95f, 1, false);
  a = PathAcceptance(t, c);
  EXPECT_EQ(SureFirstAcceptance(t, a, c, 4), a[y]);
  EXPECT_GT(a[y], a[x]);
  TokenTree root;
  root.Reset(0);
  EXPECT_EQ(SureFirstAcceptance(root, PathAcceptance(root, c), c, 0), 0.0);
}

TEST(CalibrationTest, PathAcceptanceIsProductAndNonIncreasing) {
  std::mt19937_64 rng(99);
  Calibration c;
  for (int i = 0; i < 2000; ++i) {
    c.Record(testing::RandomSource(rng), testing::RandomProb(rng), 1 + rng() % 10, rng() % 3 == 0);
  }
  for (int iter = 0; iter < 50; ++iter) {
    const TokenTree t = testing::RandomTree(rng, 40, 5);
    const auto a = PathAcceptance(t, c);
    ASSERT_EQ(a.size(), static_cast<size_t>(t.size()));
    EXPECT_DOUBLE_EQ(a[0], 1.0);
    std::vector<double> mass(t.size(), 0.0);  // children's edges so far
    for (int32_t i = 1; i < t.size(); ++i) {
      const int32_t p = t.parent[i];
      EXPECT_LE(a[i], a[p]);
      EXPECT_GE(a[i], 0.0);
      const double edge = std::min(c.Estimate(t.source[i], t.prob[i], t.depth[i]), std::max(0.0, 1.0 - mass[p]));
      mass[p] += edge;
      EXPECT_NEAR(a[i], a[p] * edge, 1e-12);
    }
    for (int32_t i = 0; i < t.size(); ++i) EXPECT_LE(mass[i], 1.0 + 1e-12);
    double sum = 0;
    for (size_t i = 1; i < a.size(); ++i) sum += a[i];
    EXPECT_NEAR(ExpectedAcceptedLength(t, c), sum, 1e-9);
  }
}

// Counts() and Restore() carry every estimate over: a restored calibration answers
// as the original in every cell, and keeps learning from there alike.
TEST(CalibrationTest, CountsRestoreEveryEstimate) {
  Calibration a(CalibrationOptions{.source_scale_prior = 0.5, .explore_strength = 2.0});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  const Source sources[] = {Source::kDraft, Source::kRequest, Source::kRecycle, Source::kPld};
  for (int i = 0; i < 500; ++i) {
    const Source s = sources[i % 4];
    const float p = u(rng);
    a.Record(s, p, 1 + i % 9, u(rng) < p * 0.7f);
  }
  Calibration b(a.options());
  b.Restore(a.Counts());
  auto same = [&](const Calibration& x, const Calibration& y) {
    for (Source s : sources) {
      for (int c = 0; c < Calibration::kConfBuckets; ++c) {
        for (int d = 1; d <= Calibration::kDepthBuckets; ++d) {
          const float p = (c + 0.5f) / Calibration::kConfBuckets;
          ASSERT_NEAR(x.Estimate(s, p, d), y.Estimate(s, p, d), 1e-12) << static_cast<int>(s) << " " << c << " " << d;
        }
      }
      ASSERT_DOUBLE_EQ(x.SourceTrials(s), y.SourceTrials(s));
    }
  };
  same(a, b);
  a.Record(Source::kPld, 0.9f, 2, true);
  b.Record(Source::kPld, 0.9f, 2, true);
  same(a, b);
}

TEST(CalibrationTest, RestoreRejectsBadCountsAndKeepsItsOwn) {
  Calibration a;
  a.Record(Source::kRequest, 0.8f, 1, true);
  const CalibrationCounts good = a.Counts();
  const double before = a.Estimate(Source::kRequest, 0.8f, 1);
  auto rejected = [&](CalibrationCounts c) {
    EXPECT_THROW(a.Restore(c), Error);
    EXPECT_DOUBLE_EQ(a.Estimate(Source::kRequest, 0.8f, 1), before);
  };
  CalibrationCounts c = good;
  c.trials.pop_back();
  rejected(c);
  c = good;
  c.confidence.push_back(0);
  rejected(c);
  c = good;
  c.trials[3] = -1;
  rejected(c);
  c = good;
  c.accepts[5] = std::nan("");
  rejected(c);
  c = good;
  c.accepts[7] = c.trials[7] + 1;  // more accepted than tried
  rejected(c);
  c = good;
  c.source_accepts[1] = INFINITY;
  rejected(c);
}

// CapTrials keeps a source's rates (its estimates barely move: only the prior's
// weight against the counts changes) while its trials shrink to the cap; a source
// under the cap is untouched.
TEST(CalibrationTest, CapTrialsKeepsRatesAndBoundsWeight) {
  Calibration a;
  for (int i = 0; i < 1000; ++i) a.Record(Source::kRequest, 0.85f, 1, i % 4 == 0);  // 25% accepted
  for (int i = 0; i < 10; ++i) a.Record(Source::kPld, 0.5f, 2, i % 2 == 0);
  const double pld = a.Estimate(Source::kPld, 0.5f, 2);
  a.CapTrials(64);
  EXPECT_NEAR(a.SourceTrials(Source::kRequest), 64, 1e-9);
  EXPECT_NEAR(a.SourceAccepts(Source::kRequest), 16, 1e-9);
  EXPECT_NEAR(a.Estimate(Source::kRequest, 0.85f, 1), 0.25, 0.06);
  EXPECT_DOUBLE_EQ(a.SourceTrials(Source::kPld), 10);
  EXPECT_DOUBLE_EQ(a.Estimate(Source::kPld, 0.5f, 2), pld);
  // New outcomes now weigh against 64 trials, not 1000: 64 acceptances move the
  // rate most of the way.
  for (int i = 0; i < 64; ++i) a.Record(Source::kRequest, 0.85f, 1, true);
  EXPECT_GT(a.Estimate(Source::kRequest, 0.85f, 1), 0.55);
}

// request_strength: within a request, a source that keeps failing (RecordRequest) is
// trusted less than the pool says, one that keeps being accepted no more than the pool
// says, and the next request starts from the pool again.
TEST(CalibrationTest, RequestStrengthDistrustsASourceThatFailsInThisRequestOnly) {
  Calibration with(CalibrationOptions{.request_strength = 8.0});
  Calibration pool;  // the same counts, no request-level scale
  auto both = [&](Source s, float p, int d, bool ok) {
    with.Record(s, p, d, ok);
    pool.Record(s, p, d, ok);
  };
  // Earlier requests: suffix matches at 0.8 accepted three times in four.
  for (int i = 0; i < 200; ++i) both(Source::kRequest, 0.8f, 1, i % 4 != 0);
  for (int i = 0; i < 50; ++i) both(Source::kPld, 0.6f, 1, i % 2 == 0);
  with.BeginRequest();
  EXPECT_DOUBLE_EQ(with.Estimate(Source::kRequest, 0.8f, 1), pool.Estimate(Source::kRequest, 0.8f, 1));
  // This request: one miss is within the grace of one acceptance; then they keep failing.
  both(Source::kRequest, 0.8f, 1, false);
  with.RecordRequest(Source::kRequest, pool.PooledEstimate(Source::kRequest, 0.8f, 1), false);
  EXPECT_DOUBLE_EQ(with.Estimate(Source::kRequest, 0.8f, 1), pool.Estimate(Source::kRequest, 0.8f, 1));
  for (int i = 0; i < 20; ++i) {
    with.RecordRequest(Source::kRequest, pool.PooledEstimate(Source::kRequest, 0.8f, 1), false);
    both(Source::kRequest, 0.8f, 1, false);
  }
  const double pooled = pool.Estimate(Source::kRequest, 0.8f, 1);
  EXPECT_LT(with.Estimate(Source::kRequest, 0.8f, 1), 0.5 * pooled);
  EXPECT_LT(with.Estimate(Source::kRequest, 0.3f, 4), pool.Estimate(Source::kRequest, 0.3f, 4));
  EXPECT_DOUBLE_EQ(with.Estimate(Source::kPld, 0.6f, 1), pool.Estimate(Source::kPld, 0.6f, 1));  // other sources
  // The next request starts from the pool (which learnt the failures too).
  with.BeginRequest();
  EXPECT_DOUBLE_EQ(with.Estimate(Source::kRequest, 0.8f, 1), pool.Estimate(Source::kRequest, 0.8f, 1));
  // A request where the source does better than the pool: no more than the pool.
  for (int i = 0; i < 12; ++i) {
    with.RecordRequest(Source::kRequest, pool.PooledEstimate(Source::kRequest, 0.8f, 1), true);
    both(Source::kRequest, 0.8f, 1, true);
  }
  EXPECT_DOUBLE_EQ(with.Estimate(Source::kRequest, 0.8f, 1), pool.Estimate(Source::kRequest, 0.8f, 1));
  // The request-level evidence is not a count: it is neither saved nor restored.
  Calibration restored(CalibrationOptions{.request_strength = 8.0});
  restored.Restore(with.Counts());
  EXPECT_DOUBLE_EQ(restored.Estimate(Source::kRequest, 0.8f, 1), pool.Estimate(Source::kRequest, 0.8f, 1));
}

}  // namespace
}  // namespace graft
