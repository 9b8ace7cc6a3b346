// Tests for TokenTree and LeafSequenceIds.
#include "graft/tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>

#include "tree_test_util.h"

namespace graft {
namespace {

TokenTree SmallTree() {
  // 0(10) -> 1(11) -> 3(13)
  //       -> 2(12) -> 4(14)
  //                -> 5(15)
  TokenTree t;
  t.Reset(10);
  t.Add(0, 11, 0.5f, Source::kDraft);
  t.Add(0, 12, 0.25f, Source::kRequest);
  t.Add(1, 13, 0.5f, Source::kDraft);
  t.Add(2, 14, 1.0f, Source::kCorpus);
  t.Add(2, 15, 0.5f, Source::kPld);
  return t;
}

TEST(TokenTreeTest, BasicsOnSmallTree) {
  const TokenTree t = SmallTree();
  EXPECT_EQ(t.Validate(), "");
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.depth[5], 2);
  EXPECT_FLOAT_EQ(t.score[3], 0.25f);
  EXPECT_FLOAT_EQ(t.score[5], 0.125f);
  EXPECT_EQ(t.FindChild(0, 12), 2);
  EXPECT_EQ(t.FindChild(0, 13), -1);
  EXPECT_EQ(t.FindChild(2, 15), 5);
  EXPECT_EQ(t.Children(0), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(t.Children(2), (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(t.Children(3).empty());
  EXPECT_EQ(t.PathTokens(5), (std::vector<Token>{10, 12, 15}));
  EXPECT_EQ(t.PathNodes(3), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(t.PathNodes(0), (std::vector<int32_t>{0}));
  EXPECT_EQ(t.Leaves(), (std::vector<int32_t>{3, 4, 5}));
}

TEST(TokenTreeTest, ResetClears) {
  TokenTree t = SmallTree();
  t.Reset(7);
  EXPECT_EQ(t.size(), 1);
  EXPECT_EQ(t.token[0], 7);
  EXPECT_EQ(t.Leaves(), (std::vector<int32_t>{0}));
  EXPECT_EQ(t.Validate(), "");
}

TEST(TokenTreeTest, AddRejectsBadParent) {
  TokenTree t;
  t.Reset(1);
  EXPECT_THROW(t.Add(1, 2, 0.5f, Source::kDraft), std::invalid_argument);
  EXPECT_THROW(t.Add(-1, 2, 0.5f, Source::kDraft), std::invalid_argument);
}

TEST(TokenTreeTest, ValidateFindsViolations) {
  {
    TokenTree t = SmallTree();
    t.Add(0, 11, 0.5f, Source::kDraft);  // duplicate sibling of node 1
    EXPECT_NE(t.Validate().find("duplicate"), std::string::npos);
  }
  {
    TokenTree t = SmallTree();
    t.depth[4] = 5;
    EXPECT_NE(t.Validate().find("depth"), std::string::npos);
  }
  {
    TokenTree t = SmallTree();
    t.score[3] = 0.9f;
    EXPECT_NE(t.Validate().find("score"), std::string::npos);
  }
  {
    TokenTree t = SmallTree();
    t.parent[1] = 3;
    EXPECT_NE(t.Validate().find("precede"), std::string::npos);
  }
  {
    TokenTree t = SmallTree();
    t.source.pop_back();
    EXPECT_NE(t.Validate(), "");
  }
  {
    TokenTree t;
    EXPECT_NE(t.Validate(), "");
  }
}

TEST(LeafSequenceIdsTest, SmallTree) {
  const auto ids = LeafSequenceIds(SmallTree().parent);
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_EQ(ids[0], (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(ids[1], (std::vector<int32_t>{0}));
  EXPECT_EQ(ids[2], (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ids[3], (std::vector<int32_t>{0}));
  EXPECT_EQ(ids[4], (std::vector<int32_t>{1}));
  EXPECT_EQ(ids[5], (std::vector<int32_t>{2}));
}

TEST(LeafSequenceIdsTest, RootOnlyAndBadInput) {
  EXPECT_EQ(LeafSequenceIds({-1}), (std::vector<std::vector<int32_t>>{{0}}));
  EXPECT_TRUE(LeafSequenceIds({}).empty());
  EXPECT_THROW(LeafSequenceIds({0}), std::invalid_argument);
  EXPECT_THROW(LeafSequenceIds({-1, 2, 0}), std::invalid_argument);
}

// For each leaf id j, the nodes tagged j are exactly the path root..leaf j; lists are
// sorted; each node's first id is a leaf in its own subtree.
TEST(LeafSequenceIdsTest, ReproducesRootToLeafPathsRandomised) {
  std::mt19937_64 rng(1234);
  for (int iter = 0; iter < 300; ++iter) {
    const TokenTree t = testing::RandomTree(rng, 1 + static_cast<int>(rng() % 80), 2 + rng() % 6);
    ASSERT_EQ(t.Validate(), "");
    const auto ids = LeafSequenceIds(t.parent);
    const auto leaves = t.Leaves();
    ASSERT_EQ(ids.size(), static_cast<size_t>(t.size()));
    for (size_t j = 0; j < leaves.size(); ++j) {
      std::set<int32_t> tagged;
      for (int32_t i = 0; i < t.size(); ++i) {
        if (std::binary_search(ids[i].begin(), ids[i].end(), static_cast<int32_t>(j))) {
          tagged.insert(i);
        }
      }
      const auto path = t.PathNodes(leaves[j]);
      EXPECT_EQ(tagged, std::set<int32_t>(path.begin(), path.end())) << "leaf " << j;
    }
    for (int32_t i = 0; i < t.size(); ++i) {
      ASSERT_FALSE(ids[i].empty());
      EXPECT_TRUE(std::is_sorted(ids[i].begin(), ids[i].end()));
      EXPECT_EQ(std::adjacent_find(ids[i].begin(), ids[i].end()), ids[i].end());
      const auto path = t.PathNodes(leaves[ids[i].front()]);
      EXPECT_NE(std::find(path.begin(), path.end(), i), path.end());
    }
    EXPECT_EQ(ids[0].size(), leaves.size());
  }
}

}  // namespace
}  // namespace graft
