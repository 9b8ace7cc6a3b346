#include "graft/retrieval_next_token.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "retrieval/test_oracle.h"

namespace graft {
namespace {

using testing_oracle::Path;

// Reference row model: token -> score map, update = decay old, overwrite with new, top k.
struct OracleTable {
  int k;
  float decay;
  std::map<Token, std::vector<std::pair<float, Token>>> rows;
  void Update(Token prev, const std::vector<Token>& next, const std::vector<float>& probs, int vocab) {
    if (prev < 0 || prev >= vocab) return;
    std::vector<std::pair<float, Token>> merged;
    auto has = [&](Token t) {
      return std::any_of(merged.begin(), merged.end(), [&](auto& e) { return e.second == t; });
    };
    for (size_t i = 0; i < next.size(); ++i)
      if (next[i] >= 0 && next[i] < vocab && probs[i] > 0 && !has(next[i])) merged.push_back({probs[i], next[i]});
    auto it = rows.find(prev);
    if (it != rows.end() && decay > 0)
      for (auto [s, t] : it->second)
        if (s * decay > 0 && !has(t)) merged.push_back({s * decay, t});
    if (merged.empty() && it == rows.end()) return;
    std::stable_sort(merged.begin(), merged.end(), [](auto& a, auto& b) { return a.first > b.first; });
    if ((int)merged.size() > k) merged.resize(k);
    rows[prev] = merged;
  }
};

TEST(NextTokenTable, UpdatesMatchReferenceAndQueryIsTopOfFullTree) {
  std::mt19937 rng(21);
  for (int run = 0; run < 60; ++run) {
    const int vocab = 3 + run % 4;
    NextTokenOptions o;
    o.k = 1 + static_cast<int32_t>(rng() % 3);
    o.max_depth = 1 + static_cast<int32_t>(rng() % 4);
    o.decay = (run % 2) ? 0.0f : 0.5f;
    NextTokenTable table(vocab, o);
    OracleTable ref{o.k, o.decay, {}};
    for (int step = 0; step < 40; ++step) {
      const Token prev = static_cast<Token>(rng() % (vocab + 1)) - (step % 7 == 0 ? 1 : 0);
      std::vector<Token> next(rng() % 5);
      std::vector<float> probs(next.size());
      for (size_t i = 0; i < next.size(); ++i) {
        next[i] = static_cast<Token>(rng() % (vocab + 1));
        probs[i] = (rng() % 10) / 9.0f;
      }
      table.Update(prev, next, probs);
      ref.Update(prev, next, probs, vocab);
      ASSERT_EQ(table.Validate(), "");
      for (Token t = 0; t < vocab; ++t) {
        const auto got_t = table.Next(t);
        const auto got_s = table.Scores(t);
        auto it = ref.rows.find(t);
        const size_t want_n = it == ref.rows.end() ? 0 : it->second.size();
        ASSERT_EQ(got_t.size(), want_n);
        for (size_t i = 0; i < want_n; ++i) {
          EXPECT_EQ(got_t[i], it->second[i].second);
          EXPECT_FLOAT_EQ(got_s[i], it->second[i].first);
        }
      }
      // Query against the full tree enumerated from the reference rows.
      const Token last = static_cast<Token>(rng() % vocab);
      std::map<Path, testing_oracle::OracleNode> full;
      std::function<void(const Path&, Token, float)> grow = [&](const Path& p, Token t, float pp) {
        if ((int)p.size() >= o.max_depth) return;
        auto it = ref.rows.find(t);
        if (it == ref.rows.end()) return;
        for (auto [s, x] : it->second) {
          Path c = p;
          c.push_back(x);
          const float prob = std::min(s, 1.0f);
          full[c] = {prob, pp * prob};
          grow(c, x, pp * prob);
        }
      };
      grow({}, last, 1.0f);
      const int32_t budget = static_cast<int32_t>(rng() % 20);
      CandidateTrie got;
      table.Query(std::vector<Token>{0, last}, budget, &got);
      EXPECT_EQ(got.source, Source::kRecycle);
      testing_oracle::ExpectTopOfOracle(got, full, budget, "run " + std::to_string(run));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(NextTokenTable, LazyRowsAreCheap) {
  NextTokenTable table(262144);
  const size_t empty = table.MemoryBytes();
  EXPECT_LE(empty, 262144u * 4 + 64);
  table.Update(5, std::vector<Token>{1, 2, 3}, std::vector<float>{0.5f, 0.3f, 0.1f});
  EXPECT_EQ(table.rows(), 1);
  EXPECT_LE(table.MemoryBytes() - empty, 1024u);
  CandidateTrie out;
  table.Query(std::vector<Token>{5}, 2, &out);
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out.token[0], 1);
  EXPECT_EQ(out.token[1], 2);
  table.Clear();
  EXPECT_EQ(table.rows(), 0);
  EXPECT_EQ(table.Validate(), "");
}

}  // namespace
}  // namespace graft
