#include "graft/retrieval_suffix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "graft/error.h"
#include "retrieval/test_oracle.h"

namespace graft {
namespace {

// Brute force: longest suffix of the tail (<= max_match, after the last negative) that
// occurs in text followed by a token >= 0.
int32_t OracleMatchLength(const std::vector<Token>& text, const std::vector<Token>& context,
                          int32_t max_match) {
  size_t begin = context.size();
  while (begin > 0 && context[begin - 1] >= 0 && context.size() - begin < (size_t)max_match) --begin;
  for (int32_t len = static_cast<int32_t>(context.size() - begin); len > 0; --len) {
    for (size_t e = len - 1; e + 1 < text.size(); ++e)
      if (text[e + 1] >= 0 &&
          std::equal(context.end() - len, context.end(), text.begin() + (e - len + 1)))
        return len;
  }
  return 0;
}

TEST(SuffixIndex, ValidAfterEveryAppendAndMatchesOracle) {
  std::mt19937 rng(3);
  for (int run = 0; run < 40; ++run) {
    const int alphabet = 2 + run % 3;
    SuffixIndex index;
    std::vector<Token> text;
    for (int i = 0; i < 150; ++i) {
      const Token t = (rng() % 25 == 0) ? SuffixIndex::kSeparator : static_cast<Token>(rng() % alphabet);
      index.Append(t);
      text.push_back(t);
      ASSERT_EQ(index.Validate(), "") << "run " << run << " step " << i;
      ASSERT_EQ(index.size(), static_cast<int64_t>(text.size()));
      std::vector<Token> context(rng() % 10);
      for (Token& c : context) c = static_cast<Token>(rng() % alphabet);
      const auto m = index.LongestMatch(context);
      ASSERT_EQ(m.length, OracleMatchLength(text, context, index.options().max_match));
      if (m.length > 0) {
        // Every occurrence end of the matched suffix, exactly.
        std::vector<int64_t> ends;
        index.Occurrences(m.state, 1 << 20, &ends);
        std::set<int64_t> got(ends.begin(), ends.end()), want;
        ASSERT_EQ(got.size(), ends.size()) << "duplicate occurrence";
        for (size_t e = m.length - 1; e < text.size(); ++e)
          if (std::equal(context.end() - m.length, context.end(), text.begin() + (e - m.length + 1)))
            want.insert(static_cast<int64_t>(e));
        ASSERT_EQ(got, want);
      }
    }
  }
}

TEST(SuffixIndex, ContextEqualToTextUsesEarlierOccurrences) {
  // "a b c a b" queried with itself: the suffix "a b" occurs at 0..1, followed by c.
  SuffixIndex index;
  const std::vector<Token> text = {1, 2, 3, 1, 2};
  index.Append(text);
  CandidateTrie out;
  index.Query(text, 8, &out);
  ASSERT_GE(out.size(), 1);
  EXPECT_EQ(out.token[0], 3);
  EXPECT_EQ(out.parent[0], -1);
  // conf(2) = 2/3, one occurrence followed by 3.
  EXPECT_NEAR(out.prob[0], 2.0f / 3.0f, 1e-6);
  EXPECT_EQ(out.source, Source::kRequest);
}

TEST(SuffixIndex, RejectsBadTokensAndClears) {
  SuffixIndex index;
  EXPECT_THROW(index.Append(-5), std::invalid_argument);
  index.Append(std::vector<Token>{1, 2, 1, 2});
  index.Clear();
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.Validate(), "");
  index.Append(std::vector<Token>{7, 8, 7});
  EXPECT_EQ(index.Validate(), "");
  CandidateTrie out;
  index.Query(std::vector<Token>{7}, 4, &out);
  ASSERT_EQ(out.size(), 2);  // 7 -> 8 -> 7
  EXPECT_EQ(out.token[0], 8);
  EXPECT_EQ(out.token[1], 7);
}

TEST(SuffixIndex, LargeTokenIdsAndReserve) {
  SuffixIndex index;
  index.Reserve(1000);
  std::mt19937 rng(11);
  for (int i = 0; i < 1000; ++i) index.Append(static_cast<Token>(262143 - rng() % 50));
  EXPECT_EQ(index.Validate(), "");
  EXPECT_GT(index.MemoryBytes(), 0u);
}

TEST(HistoryIndex, EvictsOldestAndStaysBounded) {
  HistoryOptions o;
  o.capacity_tokens = 100;
  HistoryIndex history(o);
  std::mt19937 rng(2);
  std::vector<std::vector<Token>> added;
  for (int i = 0; i < 200; ++i) {
    std::vector<Token> out(rng() % 30);
    for (Token& t : out) t = static_cast<Token>(rng() % 3);
    history.AddOutput(out);
    added.push_back(out);
    ASSERT_EQ(history.Validate(), "") << i;
    ASSERT_LE(history.size(), 100);
  }
  // The newest output is always indexed, at the end.
  const TokenSpan text = history.index().text();
  const auto& last = added.back();
  ASSERT_GE(text.size(), last.size() + 1);
  EXPECT_TRUE(std::equal(last.begin(), last.end(), text.end() - 1 - last.size()));
  // An output longer than capacity keeps its tail.
  std::vector<Token> huge(500);
  for (size_t i = 0; i < huge.size(); ++i) huge[i] = static_cast<Token>(i);
  history.AddOutput(huge);
  EXPECT_EQ(history.Validate(), "");
  EXPECT_EQ(history.num_outputs(), 1);
  EXPECT_EQ(history.index().text()[history.size() - 2], 499);
}

TEST(RequestRetriever, MergesRequestAndHistory) {
  HistoryIndex history;
  history.AddOutput(std::vector<Token>{10, 11, 12, 13});
  RequestRetriever request({}, &history);
  request.Reset(std::vector<Token>{1, 10, 11, 20, 5});
  request.Append(std::vector<Token>{10, 11});
  CandidateTrie out;
  request.Query(request.index().text(), 8, &out);
  ASSERT_EQ(ValidateTrie(out), "");
  std::set<Token> first;
  for (int32_t i = 0; i < out.size(); ++i)
    if (out.parent[i] < 0) first.insert(out.token[i]);
  EXPECT_TRUE(first.count(20));  // from the request
  EXPECT_TRUE(first.count(12));  // from the history
  RequestRetriever alone;
  alone.Reset(std::vector<Token>{4, 4});
  alone.Query(alone.index().text(), 8, &out);
  EXPECT_EQ(out.size(), 1);
}

TEST(SuffixIndex, SizeLimitIsCheckedBeforeAllocating) {
  // 2n - 1 states and link records must fit in int32: at most 2^30 tokens. Reserve and
  // HistoryIndex check the bound up front, so no gigabytes are needed to see the error.
  EXPECT_EQ(SuffixIndex::kMaxTokens, int64_t{1} << 30);
  EXPECT_LE(2 * SuffixIndex::kMaxTokens - 1, int64_t{INT32_MAX});
  SuffixIndex index;
  try {
    index.Reserve(SuffixIndex::kMaxTokens + 1);
    ADD_FAILURE() << "expected graft::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit of 1073741824"), std::string::npos) << e.what();
  }
  EXPECT_EQ(index.size(), 0);
  index.Reserve(16);  // still usable
  index.Append(std::vector<Token>{1, 2, 1, 2});
  EXPECT_EQ(index.Validate(), "");
  HistoryOptions big;
  big.capacity_tokens = SuffixIndex::kMaxTokens + 1;
  EXPECT_THROW(HistoryIndex{big}, Error);
  big.capacity_tokens = SuffixIndex::kMaxTokens;
  EXPECT_NO_THROW(HistoryIndex{big});  // capacity alone allocates nothing
}

}  // namespace
}  // namespace graft
