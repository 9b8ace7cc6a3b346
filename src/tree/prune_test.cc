// Tests for Prune.
#include "graft/prune.h"

#include <gtest/gtest.h>

#include <random>

#include "tree_test_util.h"

namespace graft {
namespace {

TEST(PruneTest, ChainWithEmptyCalibrationCutsAtThreshold) {
  TokenTree t;
  t.Reset(0);
  int32_t n = 0;
  for (int i = 1; i <= 6; ++i) n = t.Add(n, i, 0.5f, Source::kDraft);  // a = 0.5^depth
  Calibration c;
  PruneOptions o;
  o.min_accept_prob = 0.1f;  // keeps depth <= 3 (0.125), drops 0.0625
  std::vector<int32_t> kept;
  const TokenTree out = Prune(t, o, c, &kept);
  EXPECT_EQ(out.size(), 4);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 2, 3}));
  o.max_depth = 2;
  EXPECT_EQ(Prune(t, o, c).size(), 3);
  o.max_depth = 16;
  o.max_nodes = 2;
  EXPECT_EQ(Prune(t, o, c).size(), 2);
}

TEST(PruneTest, CalibrationChangesTheDecision) {
  TokenTree t;
  t.Reset(0);
  t.Add(0, 1, 0.15f, Source::kDraft);    // raw 0.15: kept at threshold 0.1
  t.Add(0, 2, 0.15f, Source::kRequest);  // same confidence, other source
  Calibration c;
  for (int i = 0; i < 200; ++i) c.Record(Source::kDraft, 0.15f, 1, false);  // draft overconfident
  PruneOptions o;
  o.min_accept_prob = 0.1f;
  std::vector<int32_t> kept;
  const TokenTree out = Prune(t, o, c, &kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(out.token, (std::vector<Token>{0, 2}));
}

TEST(PruneTest, RootOnlyAndEverythingDropped) {
  TokenTree t;
  t.Reset(5);
  t.Add(0, 1, 0.01f, Source::kDraft);
  Calibration c;
  std::vector<int32_t> kept;
  const TokenTree out = Prune(t, PruneOptions{}, c, &kept);
  EXPECT_EQ(out.size(), 1);
  EXPECT_EQ(out.token[0], 5);
  EXPECT_EQ(kept, (std::vector<int32_t>{0}));
}

// Randomised invariants: never adds nodes, keeps the root and parents-before-children,
// keeps exactly the nodes that pass (when max_nodes does not bind), copies node data.
TEST(PruneTest, InvariantsRandomised) {
  std::mt19937_64 rng(2024);
  for (int iter = 0; iter < 500; ++iter) {
    const TokenTree in = testing::RandomTree(rng, 1 + static_cast<int>(rng() % 100), 2 + rng() % 6);
    Calibration c;
    const int n_rec = static_cast<int>(rng() % 500);
    for (int i = 0; i < n_rec; ++i) {
      c.Record(testing::RandomSource(rng), testing::RandomProb(rng), 1 + rng() % 9, rng() % 2);
    }
    PruneOptions o;
    o.min_accept_prob = std::uniform_real_distribution<float>(0.0f, 0.5f)(rng);
    o.max_depth = static_cast<int>(rng() % 8);
    o.max_nodes = (rng() % 3 == 0) ? static_cast<int32_t>(rng() % 20) : 0;
    std::vector<int32_t> kept;
    const TokenTree out = Prune(in, o, c, &kept);
    ASSERT_EQ(out.Validate(), "");
    ASSERT_LE(out.size(), in.size());
    ASSERT_GE(out.size(), 1);
    ASSERT_EQ(kept.size(), static_cast<size_t>(out.size()));
    EXPECT_EQ(kept[0], 0);
    if (o.max_nodes > 0) {
      EXPECT_LE(out.size(), std::max(1, o.max_nodes));
    }
    const auto a = PathAcceptance(in, c);
    std::vector<int32_t> new_of(in.size(), -1);
    for (int32_t j = 0; j < out.size(); ++j) {
      if (j > 0) {
        ASSERT_GT(kept[j], kept[j - 1]);
      }
      const int32_t i = kept[j];
      new_of[i] = j;
      EXPECT_EQ(out.token[j], in.token[i]);
      EXPECT_EQ(out.prob[j], in.prob[i]);
      EXPECT_EQ(out.score[j], in.score[i]);
      EXPECT_EQ(out.depth[j], in.depth[i]);
      EXPECT_EQ(out.source[j], in.source[i]);
      if (j > 0) {
        EXPECT_EQ(out.parent[j], new_of[in.parent[i]]);
        EXPECT_GE(a[i], o.min_accept_prob);
        EXPECT_LE(in.depth[i], o.max_depth);
      }
    }
    if (o.max_nodes == 0) {  // maximal: every dropped child of a kept node fails a test
      for (int32_t i = 1; i < in.size(); ++i) {
        if (new_of[i] < 0 && new_of[in.parent[i]] >= 0) {
          EXPECT_TRUE(a[i] < o.min_accept_prob || in.depth[i] > o.max_depth);
        }
      }
    }
  }
}

}  // namespace
}  // namespace graft
