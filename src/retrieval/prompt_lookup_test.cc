#include "graft/retrieval_pld.h"

#include <gtest/gtest.h>

#include <random>

namespace graft {
namespace {

// Reference: collect every match of the n-gram, take the last (newest).
std::vector<Token> OracleChain(const std::vector<Token>& ctx, int32_t budget,
                               const PromptLookupOptions& o, int32_t* n_used) {
  const int64_t size = static_cast<int64_t>(ctx.size());
  for (int32_t n = o.max_ngram; n >= o.min_ngram; --n) {
    if (n > size - 1) continue;
    int64_t best = -1;
    for (int64_t i = 0; i + n < size; ++i) {
      bool eq = true;
      for (int32_t k = 0; k < n; ++k) eq = eq && ctx[i + k] == ctx[size - n + k];
      if (eq) best = i;
    }
    if (best < 0) continue;
    *n_used = n;
    std::vector<Token> chain;
    for (int64_t j = best + n; j < size && static_cast<int32_t>(chain.size()) < budget; ++j)
      chain.push_back(ctx[j]);
    return chain;
  }
  return {};
}

TEST(PromptLookup, MatchesOracleOnTinyAlphabets) {
  std::mt19937 rng(17);
  for (int iter = 0; iter < 3000; ++iter) {
    PromptLookupOptions o;
    o.max_ngram = 1 + static_cast<int32_t>(rng() % 4);
    o.min_ngram = 1 + static_cast<int32_t>(rng() % o.max_ngram);
    PromptLookup pld(o);
    std::vector<Token> ctx(rng() % 40);
    for (Token& t : ctx) t = static_cast<Token>(rng() % (2 + iter % 3));
    const int32_t budget = static_cast<int32_t>(rng() % 10);
    CandidateTrie got;
    pld.Query(ctx, budget, &got);
    int32_t n = 0;
    const std::vector<Token> want = budget > 0 ? OracleChain(ctx, budget, o, &n) : std::vector<Token>{};
    ASSERT_EQ(got.token, want) << "iter " << iter;
    EXPECT_EQ(got.source, Source::kPld);
    for (int32_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got.parent[i], i - 1);  // a chain
      EXPECT_FLOAT_EQ(got.prob[i], n / (n + 1.0f));
    }
    ASSERT_EQ(ValidateTrie(got), "");
  }
}

TEST(PromptLookup, RespectsScanWindow) {
  PromptLookupOptions o;
  o.max_scan = 4;
  PromptLookup pld(o);
  CandidateTrie got;
  pld.Query(std::vector<Token>{1, 2, 3, 9, 9, 9, 9, 1, 2}, 4, &got);
  EXPECT_TRUE(got.empty());  // the match at 0 is outside the window
  pld = PromptLookup();
  pld.Query(std::vector<Token>{1, 2, 3, 9, 9, 9, 9, 1, 2}, 4, &got);
  ASSERT_EQ(got.size(), 4);
  EXPECT_EQ(got.token[0], 3);
}

}  // namespace
}  // namespace graft
