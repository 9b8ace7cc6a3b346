// Tests for VerifyGreedy and RecordOutcome: every committed token is the target's
// argmax in the pass that verified it, and whole speculative decoding loops with any
// proposal trees reproduce plain greedy decoding exactly.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "fake_target_test_util.h"
#include "graft/graft.h"
#include "graft/prune.h"
#include "graft/verify.h"

namespace graft {
namespace {

using testing::FakeTarget;
using testing::NodeContext;

TEST(VerifyGreedyTest, FollowsArgmaxChildAndReturnsBonus) {
  TokenTree t;
  t.Reset(9);
  const int32_t a = t.Add(0, 1, 0.5f, Source::kDraft);
  const int32_t b = t.Add(0, 2, 0.5f, Source::kRequest);
  const int32_t c = t.Add(b, 3, 0.5f, Source::kDraft);
  const int32_t d = t.Add(b, 4, 0.5f, Source::kDraft);
  const int32_t e = t.Add(d, 5, 0.5f, Source::kDraft);
  // Target: after root -> 2, after node b -> 4, after node d -> 7 (no such child).
  std::map<int32_t, Token> argmax = {{0, 2}, {b, 4}, {d, 7}};
  int calls = 0;
  const VerifyResult r = VerifyGreedy(t, [&](int32_t n) { ++calls; return argmax.at(n); });
  EXPECT_EQ(r.accepted, (std::vector<int32_t>{0, b, d}));
  EXPECT_EQ(r.bonus, 7);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.num_accepted_proposals(), 2);
  EXPECT_EQ(r.CommittedTokens(t), (std::vector<Token>{2, 4, 7}));
  EXPECT_EQ(r.tested, (std::vector<int32_t>{a, b, c, d, e}));
  EXPECT_EQ(r.tested_accepted, (std::vector<uint8_t>{0, 1, 0, 1, 0}));

  Calibration cal;
  RecordOutcome(t, r, &cal);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kDraft), 4.0);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kDraft), 1.0);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kRequest), 1.0);
  EXPECT_DOUBLE_EQ(cal.SourceAccepts(Source::kRequest), 1.0);
}

// The request-level evidence (CalibrationOptions::request_strength) counts a position
// once per source: siblings exclude each other, so three rejected alternatives at one
// position are one miss (within the grace of one acceptance), not three.
TEST(VerifyGreedyTest, RecordOutcomeCountsEachPositionOnceForTheRequest) {
  Calibration cal(CalibrationOptions{.request_strength = 8.0});
  TokenTree t;
  t.Reset(9);
  for (Token x : {1, 2, 3}) t.Add(0, x, 0.8f, Source::kRequest);
  const VerifyResult r = VerifyGreedy(t, [](int32_t) { return Token{7}; });  // none of them
  ASSERT_EQ(r.tested.size(), 3u);
  RecordOutcome(t, r, &cal);
  EXPECT_DOUBLE_EQ(cal.SourceTrials(Source::kRequest), 3.0);  // the pooled cells see every node
  EXPECT_DOUBLE_EQ(cal.Estimate(Source::kRequest, 0.8f, 1), cal.PooledEstimate(Source::kRequest, 0.8f, 1));
  // Three more missed positions: now the source is trusted less than the pool.
  for (int k = 0; k < 3; ++k) RecordOutcome(t, r, &cal);
  EXPECT_LT(cal.Estimate(Source::kRequest, 0.8f, 1), 0.95 * cal.PooledEstimate(Source::kRequest, 0.8f, 1));
}

TEST(VerifyGreedyTest, RootOnlyTree) {
  TokenTree t;
  t.Reset(3);
  const VerifyResult r = VerifyGreedy(t, [](int32_t) { return Token{5}; });
  EXPECT_EQ(r.accepted, (std::vector<int32_t>{0}));
  EXPECT_EQ(r.bonus, 5);
  EXPECT_TRUE(r.tested.empty());
}

// A proposal tree for one step, rooted at committed.back().
using TreeBuilder =
    std::function<TokenTree(const std::vector<Token>& committed, std::mt19937_64& rng, Calibration& cal)>;

struct Strategy {
  const char* name;
  TreeBuilder build;
};

std::vector<Strategy> Strategies(const FakeTarget& target) {
  const int vocab = target.vocab();
  auto random_tree = [vocab](const std::vector<Token>& committed, std::mt19937_64& rng, Calibration&) {
    TokenTree t;
    t.Reset(committed.back());
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < 4 * n && t.size() < n; ++i) {
      const int32_t p = static_cast<int32_t>(rng() % t.size());
      const Token tok = static_cast<Token>(rng() % vocab);
      if (t.FindChild(p, tok) < 0) t.Add(p, tok, 0.5f, Source::kDraft);
    }
    return t;
  };
  auto wrong_tree = [vocab, &target](const std::vector<Token>& committed, std::mt19937_64& rng,
                                     Calibration&) {
    TokenTree t;
    t.Reset(committed.back());
    for (int32_t node = 0; node < t.size() && t.size() < 20; ++node) {
      const Token good = target.ArgmaxAfter(NodeContext(committed, t, node));
      for (Token tok = 0; tok < vocab && t.depth[node] < 3; ++tok) {
        if (tok != good && rng() % 2) t.Add(node, tok, 0.5f, Source::kRecycle);
      }
    }
    return t;
  };
  auto right_tree = [vocab, &target](const std::vector<Token>& committed, std::mt19937_64& rng,
                                     Calibration&) {
    TokenTree t;
    t.Reset(committed.back());
    int32_t node = 0;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int d = 0; d < len; ++d) {
      const Token good = target.ArgmaxAfter(NodeContext(committed, t, node));
      // A distinct wrong sibling first, then the right child.
      const Token other = static_cast<Token>((good + 1 + rng() % (vocab - 1)) % vocab);
      t.Add(node, other, 0.3f, Source::kCorpus);
      node = t.Add(node, good, 0.6f, Source::kOracle);
    }
    return t;
  };
  // The engine's pipeline: random draft tree -> Prune -> Graft a "retrieved" trie that
  // is right for a few tokens then wrong.
  auto pipeline = [vocab, &target, random_tree](const std::vector<Token>& committed,
                                                std::mt19937_64& rng, Calibration& cal) {
    TokenTree t = random_tree(committed, rng, cal);
    PruneOptions po;
    po.min_accept_prob = 0.1f;
    t = Prune(t, po, cal);
    CandidateTrie trie;
    std::vector<Token> ctx = committed;
    int32_t parent = -1;
    const int right = static_cast<int>(rng() % 5);
    for (int d = 0; d < 6; ++d) {
      Token tok = target.ArgmaxAfter(ctx);
      if (d >= right) tok = static_cast<Token>(rng() % vocab);
      parent = trie.Add(parent, tok, 0.9f);
      ctx.push_back(tok);
    }
    trie.Add(-1, static_cast<Token>(rng() % vocab), 0.4f);  // a sibling, maybe a duplicate
    Graft(&t, 0, trie, Source::kRequest, 24, cal);
    return t;
  };
  return {{"random", random_tree}, {"wrong", wrong_tree}, {"right", right_tree},
          {"prune+graft", pipeline}};
}

TEST(VerifyGreedyTest, SpeculativeLoopEqualsPlainGreedy) {
  const int kTokens = 200;
  for (bool quantize : {false, true}) {
    const FakeTarget target(8, 3, quantize ? 11 : 12, 3.0f, quantize);
    for (const Strategy& s : Strategies(target)) {
      for (uint64_t seed = 0; seed < 5; ++seed) {
        const std::vector<Token> prompt = {static_cast<Token>(seed % 8), 1, 2};
        std::vector<Token> plain = prompt;
        while (plain.size() < prompt.size() + kTokens) plain.push_back(target.ArgmaxAfter(plain));

        std::mt19937_64 rng(seed);
        Calibration cal;
        std::vector<Token> spec = prompt;
        int steps = 0;
        while (spec.size() < prompt.size() + kTokens) {
          const TokenTree tree = s.build(spec, rng, cal);
          ASSERT_EQ(tree.Validate(), "") << s.name;
          std::map<int32_t, Token> seen;  // the target's argmax per node in this pass
          const VerifyResult r = VerifyGreedy(tree, [&](int32_t node) {
            return seen[node] = target.ArgmaxAfter(NodeContext(spec, tree, node));
          });
          // Every committed token is the target's choice at the node that verified it.
          for (size_t i = 1; i < r.accepted.size(); ++i) {
            const int32_t n = r.accepted[i];
            ASSERT_EQ(tree.parent[n], r.accepted[i - 1]);
            ASSERT_EQ(tree.token[n], seen.at(tree.parent[n])) << s.name;
          }
          ASSERT_EQ(r.bonus, seen.at(r.last_accepted())) << s.name;
          RecordOutcome(tree, r, &cal);
          for (Token tok : r.CommittedTokens(tree)) spec.push_back(tok);
          ++steps;
        }
        spec.resize(plain.size());
        EXPECT_EQ(spec, plain) << s.name << " seed " << seed;
        if (std::string(s.name) == "right") {
          EXPECT_LT(steps, kTokens / 2) << "right trees should speed up";
        }
        if (std::string(s.name) == "wrong") {
          EXPECT_EQ(steps, kTokens);
        }
      }
    }
  }
}

}  // namespace
}  // namespace graft
