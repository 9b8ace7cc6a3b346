// Building blocks of the proposers that need no model: the context each retrieval
// source is handed.
#include "engine/proposer.h"

#include <gtest/gtest.h>

namespace graft {
namespace {

TEST(RetrievalTest, ContextForHandsTheTailAndThePath) {
  const std::vector<Token> committed = {1, 2, 3, 4, 5};
  TokenTree tree;
  tree.Reset(5);
  const int32_t a = tree.Add(0, 6, 0.5f, Source::kDraft);
  const int32_t b = tree.Add(a, 7, 0.5f, Source::kDraft);
  EXPECT_EQ(Retrieval::ContextFor(committed, tree, b, 2), (std::vector<Token>{4, 5, 6, 7}));
  EXPECT_EQ(Retrieval::ContextFor(committed, tree, 0, 0), committed);  // 0 = everything
  EXPECT_EQ(Retrieval::ContextFor(committed, tree, a, 99), (std::vector<Token>{1, 2, 3, 4, 5, 6}));
}

// Prompt lookup must see the whole prompt: the only earlier occurrence of the context's
// last tokens is 1000 tokens back, far outside the indexes' 64-token tail.
TEST(RetrievalTest, PromptLookupSeesTheWholePrompt) {
  std::vector<Token> committed = {900, 901, 902, 903, 904, 905};
  for (int i = 0; i < 1000; ++i) committed.push_back(10 + i % 50);
  committed.insert(committed.end(), {900, 901, 902});
  PromptLookup pld;
  EXPECT_EQ(pld.ContextTokens(), 0);
  TokenTree tree;
  tree.Reset(committed.back());
  Retrieval q;
  q.Query(pld, committed, tree, 0, 3);
  Calibration calibration;
  ASSERT_EQ(q.GraftInto(&tree, 4, 8, 0.0f, calibration), 3);
  EXPECT_EQ(tree.PathTokens(3), (std::vector<Token>{902, 903, 904, 905}));
}

}  // namespace
}  // namespace graft
