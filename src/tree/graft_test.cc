// Tests for Graft and GraftMany.
#include "graft/graft.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "graft/prune.h"
#include "tree_test_util.h"

namespace graft {
namespace {

std::vector<Token> TriePath(const CandidateTrie& c, int32_t i) {
  std::vector<Token> out;
  for (; i >= 0; i = c.parent[i]) out.insert(out.begin(), c.token[i]);
  return out;
}

TEST(GraftTest, MergesExistingChildAndRespectsBudget) {
  TokenTree t;
  t.Reset(0);
  t.Add(0, 1, 0.9f, Source::kDraft);  // node 1
  CandidateTrie c;
  const int32_t a = c.Add(-1, 1, 0.8f);  // equals node 1: merge
  c.Add(a, 2, 0.8f);                     // new under node 1
  c.Add(-1, 3, 0.5f);                    // new under root
  Calibration cal;
  TokenTree u = t;
  EXPECT_EQ(Graft(&u, 0, c, Source::kRequest, 10, cal), 2);
  EXPECT_EQ(u.Validate(), "");
  EXPECT_EQ(u.size(), 4);
  EXPECT_EQ(u.FindChild(0, 1), 1);
  EXPECT_GE(u.FindChild(1, 2), 0);
  EXPECT_GE(u.FindChild(0, 3), 0);
  EXPECT_EQ(u.source[u.FindChild(1, 2)], Source::kRequest);
  // Budget 3: one slot; 0.9 * 0.8 = 0.72 beats 0.5.
  u = t;
  EXPECT_EQ(Graft(&u, 0, c, Source::kRequest, 3, cal), 1);
  EXPECT_EQ(u.size(), 3);
  EXPECT_GE(u.FindChild(1, 2), 0);
  // No free slot, or already over budget: nothing added.
  u = t;
  EXPECT_EQ(Graft(&u, 0, c, Source::kRequest, 2, cal), 0);
  EXPECT_EQ(Graft(&u, 0, c, Source::kRequest, 1, cal), 0);
  EXPECT_EQ(u.size(), 2);
}

TEST(GraftTest, GlobalPriorityAcrossTries) {
  TokenTree t;
  t.Reset(0);
  const int32_t x = t.Add(0, 1, 0.05f, Source::kDraft);  // leaves the root's other children 0.95
  CandidateTrie low, high;
  low.Add(-1, 5, 0.9f);   // under root: gain 0.9
  high.Add(-1, 6, 0.9f);  // under x: gain 0.05 * 0.9 = 0.045
  const int32_t h = low.Add(0, 7, 0.95f);  // chain under low: 0.9 * 0.95 = 0.855
  (void)h;
  Calibration cal;
  const GraftRequest reqs[] = {{x, &high, Source::kCorpus}, {0, &low, Source::kRequest}};
  EXPECT_EQ(GraftMany(&t, reqs, 4, cal), 2);
  EXPECT_EQ(t.Validate(), "");
  EXPECT_GE(t.FindChild(0, 5), 0);
  EXPECT_GE(t.FindChild(t.FindChild(0, 5), 7), 0);
  EXPECT_EQ(t.FindChild(x, 6), -1);
  // min_accept_prob stops low-value fills even with free slots.
  TokenTree u;
  u.Reset(0);
  u.Add(0, 1, 0.05f, Source::kDraft);
  GraftOptions o;
  o.min_accept_prob = 0.88f;
  EXPECT_EQ(GraftMany(&u, reqs, 100, cal, o), 1);
}

// Siblings carry distinct tokens, so at most one is accepted: two sources that each
// promise 0.9 for different next tokens cannot both be worth 0.9. The second gets the
// mass the first left (0.1), so the first source's second token wins the slot.
TEST(GraftTest, SiblingsShareTheirParentsMass) {
  CandidateTrie a, b;
  const int32_t a1 = a.Add(-1, 5, 0.9f);
  a.Add(a1, 6, 0.9f);  // gain 0.81
  b.Add(-1, 7, 0.9f);  // gain 0.9 on its own, 0.1 beside token 5
  Calibration cal;
  const GraftRequest reqs[] = {{0, &a, Source::kRequest}, {0, &b, Source::kRecycle}};
  TokenTree t;
  t.Reset(0);
  EXPECT_EQ(GraftMany(&t, reqs, 3, cal), 2);
  EXPECT_EQ(t.Validate(), "");
  EXPECT_GE(t.FindChild(t.FindChild(0, 5), 6), 0);
  EXPECT_EQ(t.FindChild(0, 7), -1);
  // With room for all three, token 7 joins last, at the mass left.
  TokenTree u;
  u.Reset(0);
  EXPECT_EQ(GraftMany(&u, reqs, 4, cal), 3);
  EXPECT_EQ(u.token[3], 7);
  const std::vector<double> acc = PathAcceptance(u, cal);
  EXPECT_NEAR(acc[u.FindChild(0, 7)], 0.1, 1e-6);
  // The floor sees the lowered gain: at 0.2 the 0.1 sibling stays out.
  TokenTree v;
  v.Reset(0);
  GraftOptions o;
  o.min_accept_prob = 0.2f;
  EXPECT_EQ(GraftMany(&v, reqs, 100, cal, o), 2);
  EXPECT_EQ(v.FindChild(0, 7), -1);
}

TEST(GraftTest, DuplicateSiblingsInsideTrieMerge) {
  TokenTree t;
  t.Reset(0);
  CandidateTrie c;
  const int32_t a = c.Add(-1, 4, 0.6f);
  const int32_t b = c.Add(-1, 4, 0.5f);  // same token as a
  c.Add(a, 1, 0.9f);
  c.Add(b, 1, 0.9f);  // same path as the previous node
  c.Add(b, 2, 0.9f);
  Calibration cal;
  EXPECT_EQ(Graft(&t, 0, c, Source::kPld, 100, cal), 3);
  EXPECT_EQ(t.Validate(), "");
  EXPECT_EQ(t.size(), 4);
}

// Randomised: budget never exceeded, no duplicates (Validate), old nodes unchanged,
// every added node is some candidate path, and with an unbinding budget every
// candidate path ends up in the tree exactly once.
TEST(GraftTest, InvariantsRandomised) {
  std::mt19937_64 rng(77);
  for (int iter = 0; iter < 400; ++iter) {
    const int vocab = 2 + static_cast<int>(rng() % 4);
    TokenTree t = testing::RandomTree(rng, 1 + static_cast<int>(rng() % 30), vocab);
    const TokenTree before = t;
    Calibration cal;
    for (int i = 0; i < 100; ++i) {
      cal.Record(testing::RandomSource(rng), testing::RandomProb(rng), 1 + rng() % 8, rng() % 2);
    }
    std::vector<CandidateTrie> tries(1 + rng() % 4);
    std::vector<GraftRequest> reqs;
    for (auto& c : tries) {
      c = testing::RandomTrie(rng, static_cast<int>(rng() % 25), vocab);
      reqs.push_back({static_cast<int32_t>(rng() % t.size()), &c, testing::RandomSource(rng)});
    }
    const bool unbounded = rng() % 4 == 0;
    const int32_t budget = unbounded ? 100000 : static_cast<int32_t>(rng() % 60);
    const int32_t added = GraftMany(&t, reqs, budget, cal);
    ASSERT_EQ(t.Validate(), "");
    EXPECT_EQ(added, t.size() - before.size());
    EXPECT_LE(t.size(), std::max(budget, before.size()));
    if (before.size() >= budget) {
      EXPECT_EQ(added, 0);
    }
    for (int32_t i = 0; i < before.size(); ++i) {
      ASSERT_EQ(t.token[i], before.token[i]);
      ASSERT_EQ(t.parent[i], before.parent[i]);
      ASSERT_EQ(t.source[i], before.source[i]);
    }
    // All candidate paths (absolute token paths from the root).
    std::set<std::vector<Token>> cand_paths;
    for (const auto& r : reqs) {
      const auto base = before.PathTokens(r.attach_node);
      for (int32_t i = 0; i < r.trie->size(); ++i) {
        auto p = base;
        const auto tail = TriePath(*r.trie, i);
        p.insert(p.end(), tail.begin(), tail.end());
        cand_paths.insert(p);
      }
    }
    std::set<std::vector<Token>> tree_paths;
    for (int32_t i = 0; i < t.size(); ++i) {
      const auto p = t.PathTokens(i);
      if (i >= before.size()) {
        EXPECT_TRUE(cand_paths.count(p)) << "added node is no candidate";
      }
      tree_paths.insert(p);
    }
    EXPECT_EQ(tree_paths.size(), static_cast<size_t>(t.size()));
    if (unbounded) {
      for (const auto& p : cand_paths) EXPECT_TRUE(tree_paths.count(p));
    }
  }
}

TEST(GraftTest, RandomPruneThenGraftStaysValid) {
  std::mt19937_64 rng(31);
  Calibration cal;
  for (int iter = 0; iter < 300; ++iter) {
    TokenTree t = testing::RandomTree(rng, 40, 4);
    PruneOptions po;
    po.min_accept_prob = 0.05f;
    t = Prune(t, po, cal);
    CandidateTrie c = testing::RandomTrie(rng, 20, 4);
    const int32_t budget = 10 + static_cast<int32_t>(rng() % 30);
    const int32_t before = t.size();
    const int32_t added = Graft(&t, static_cast<int32_t>(rng() % t.size()), c, Source::kCorpus,
                                budget, cal);
    ASSERT_EQ(t.Validate(), "");
    EXPECT_LE(t.size(), std::max(budget, before));
    EXPECT_EQ(added, t.size() - before);
    t = Prune(t, po, cal);
    ASSERT_EQ(t.Validate(), "");
    for (int32_t i = 0; i < t.size(); ++i) {
      cal.Record(t.source[i], t.prob[i], t.depth[i], rng() % 2);
    }
  }
}

}  // namespace
}  // namespace graft
