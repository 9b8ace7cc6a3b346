// Tests for VerifyStochastic: losslessness. The distribution of the first kLen tokens
// generated speculatively (with good, bad, random, exhaustive and multi-source grafted
// proposal trees) must match the exact distribution of plain sampling, computed by
// enumeration over a 4-token vocabulary. A chi-square test with fixed seeds passes for
// the exact rule and must fail for a deliberately biased one (it forgets the output
// position, so steps reuse uniforms: right marginals, wrong joint). With the same seed
// every tree writes what plain sampling writes (so the exact rule's chi-square is the
// same for every tree), and accepts as much as the residual rule it replaced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fake_target_test_util.h"
#include "graft/graft.h"
#include "graft/verify.h"
#include "verify_internal.h"

namespace graft {
namespace {

using internal::AcceptRule;
using testing::FakeTarget;
using testing::NodeContext;

constexpr int kVocab = 4;
constexpr int kLen = 3;  // tokens per trial: kVocab^kLen = 64 cells
constexpr int kTrials = 20000;

// Tokens of `d` sorted by probability, descending (ties to the lower id); tokens with
// probability 0 come last in id order.
std::vector<Token> ByProb(const Distribution& d) {
  std::vector<Token> v(kVocab);
  std::iota(v.begin(), v.end(), 0);
  std::stable_sort(v.begin(), v.end(), [&](Token a, Token b) { return d.Prob(a) > d.Prob(b); });
  return v;
}

using TreeBuilder = std::function<TokenTree(const std::vector<Token>& committed, std::mt19937_64& rng)>;

struct Strategy {
  std::string name;
  TreeBuilder build;
};

std::vector<Strategy> Strategies(const FakeTarget& target, const SamplingParams& params) {
  auto dist = [&target, params](const std::vector<Token>& committed, const TokenTree& t, int32_t n) {
    return target.DistAfter(NodeContext(committed, t, n), params);
  };
  // Each node gets the target's own top-2 tokens, to depth 3 (15 nodes).
  auto good = [dist](const std::vector<Token>& committed, std::mt19937_64&) {
    TokenTree t;
    t.Reset(committed.back());
    for (int32_t n = 0; n < t.size(); ++n) {
      if (t.depth[n] >= 3) continue;
      const auto order = ByProb(dist(committed, t, n));
      for (int i = 0; i < 2; ++i) t.Add(n, order[i], 0.5f, Source::kDraft);
    }
    return t;
  };
  // Each node gets the two least probable tokens (often probability 0), to depth 2.
  auto bad = [dist](const std::vector<Token>& committed, std::mt19937_64&) {
    TokenTree t;
    t.Reset(committed.back());
    for (int32_t n = 0; n < t.size(); ++n) {
      if (t.depth[n] >= 2) continue;
      const auto order = ByProb(dist(committed, t, n));
      for (int i = kVocab - 1; i >= kVocab - 2; --i) t.Add(n, order[i], 0.5f, Source::kDraft);
    }
    return t;
  };
  auto random = [](const std::vector<Token>& committed, std::mt19937_64& rng) {
    TokenTree t;
    t.Reset(committed.back());
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < 4 * n && t.size() < n; ++i) {
      const int32_t p = static_cast<int32_t>(rng() % t.size());
      const Token tok = static_cast<Token>(rng() % kVocab);
      if (t.FindChild(p, tok) < 0) t.Add(p, tok, 0.5f, Source::kDraft);
    }
    return t;
  };
  // Every token under the root in a random order (all can be rejected only if they
  // carry no mass), each with one random child.
  auto exhaustive = [](const std::vector<Token>& committed, std::mt19937_64& rng) {
    TokenTree t;
    t.Reset(committed.back());
    std::vector<Token> all(kVocab);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (Token x : all) {
      const int32_t c = t.Add(0, x, 0.25f, Source::kRecycle);
      t.Add(c, static_cast<Token>(rng() % kVocab), 0.25f, Source::kRecycle);
    }
    return t;
  };
  // A draft chain (target's mode) plus two retrieval tries that duplicate it and each
  // other, grafted under a budget: merged duplicates must not change the distribution.
  auto multi_source = [dist, random](const std::vector<Token>& committed, std::mt19937_64& rng) {
    TokenTree t;
    t.Reset(committed.back());
    int32_t n = 0;
    for (int d = 0; d < 2; ++d) n = t.Add(n, ByProb(dist(committed, t, n))[0], 0.6f, Source::kDraft);
    CandidateTrie a, b;
    for (int32_t i = 0, p = -1; i < 3; ++i) p = a.Add(p, t.token[std::min(i + 1, t.size() - 1)], 0.7f);
    for (int i = 0; i < 8; ++i) {
      b.Add(static_cast<int32_t>(rng() % (b.size() + 1)) - 1, static_cast<Token>(rng() % kVocab), 0.5f);
    }
    const GraftRequest reqs[] = {{0, &a, Source::kRequest}, {0, &b, Source::kCorpus},
                                 {n, &b, Source::kPld}};
    Calibration cal;
    GraftMany(&t, reqs, 12, cal);
    return t;
  };
  return {{"good", good}, {"bad", bad}, {"random", random}, {"exhaustive", exhaustive},
          {"multi_source", multi_source}};
}

// Exact probability of each kLen-token continuation under plain sampling; cell index =
// tokens in base kVocab, first token most significant.
std::vector<double> ExactJoint(const FakeTarget& target, const SamplingParams& params,
                               const std::vector<Token>& prompt) {
  std::vector<double> out;
  std::function<void(std::vector<Token>&, double, int)> rec = [&](std::vector<Token>& ctx, double p,
                                                                   int left) {
    if (left == 0) {
      out.push_back(p);
      return;
    }
    const Distribution d = target.DistAfter(ctx, params);
    for (Token x = 0; x < kVocab; ++x) {
      ctx.push_back(x);
      rec(ctx, p * d.Prob(x), left - 1);
      ctx.pop_back();
    }
  };
  std::vector<Token> ctx = prompt;
  rec(ctx, 1.0, kLen);
  return out;
}

int CellOf(const std::vector<Token>& toks, size_t from) {
  int c = 0;
  for (int i = 0; i < kLen; ++i) c = c * kVocab + toks[from + i];
  return c;
}

struct ChiSquare {
  double stat = 0;
  double critical = 0;
  int impossible = 0;  // observations in cells of probability 0
  bool Passes() const { return impossible == 0 && stat < critical; }
};

// Pearson chi-square; cells with expected count < 5 are pooled. Critical value at
// z = 4 (p ~ 3e-5) by the Wilson-Hilferty approximation.
ChiSquare PearsonTest(const std::vector<double>& exact, const std::vector<int>& count, int n) {
  ChiSquare r;
  double pooled_e = 0, pooled_o = 0;
  int cells = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double e = exact[i] * n;
    if (exact[i] == 0) {
      r.impossible += count[i];
    } else if (e < 5) {
      pooled_e += e;
      pooled_o += count[i];
    } else {
      r.stat += (count[i] - e) * (count[i] - e) / e;
      ++cells;
    }
  }
  if (pooled_e >= 1) {
    r.stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  const double df = std::max(1, cells - 1);
  const double h = 2.0 / (9.0 * df);
  r.critical = df * std::pow(1 - h + 4.0 * std::sqrt(h), 3);
  return r;
}

// The draws of trial `trial` of a run seeded `seed`: its own seed, stream 0.
PositionSampler TrialSampler(const SamplingParams& params, uint64_t seed, int trial) {
  SamplingParams p = params;
  p.seed = seed * 1000003 + static_cast<uint64_t>(trial);
  return PositionSampler(p);
}

// kLen tokens after `prompt` generated speculatively with `sampler`, trees built by `s`.
std::vector<Token> Speculate(const FakeTarget& target, const SamplingParams& params,
                             const std::vector<Token>& prompt, const Strategy& s, AcceptRule rule,
                             const PositionSampler& sampler, std::mt19937_64& tree_rng) {
  std::vector<Token> ctx = prompt;
  while (ctx.size() < prompt.size() + kLen) {
    const TokenTree tree = s.build(ctx, tree_rng);
    const VerifyResult r = internal::VerifyStochasticWithRule(
        tree, [&](int32_t n) { return target.DistAfter(NodeContext(ctx, tree, n), params); }, sampler,
        static_cast<int64_t>(ctx.size() - prompt.size()), rule);
    for (Token t : r.CommittedTokens(tree)) ctx.push_back(t);
  }
  return std::vector<Token>(ctx.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                            ctx.begin() + static_cast<std::ptrdiff_t>(prompt.size() + kLen));
}

// kLen tokens after `prompt` by plain sampling with `sampler`, one position at a time.
std::vector<Token> PlainSample(const FakeTarget& target, const SamplingParams& params,
                               const std::vector<Token>& prompt, const PositionSampler& sampler) {
  std::vector<Token> ctx = prompt;
  for (int i = 0; i < kLen; ++i) ctx.push_back(sampler.Sample(target.DistAfter(ctx, params), i));
  return std::vector<Token>(ctx.begin() + static_cast<std::ptrdiff_t>(prompt.size()), ctx.end());
}

// Runs kTrials speculative generations of kLen tokens and returns the cell counts.
std::vector<int> SpeculativeCounts(const FakeTarget& target, const SamplingParams& params,
                                   const std::vector<Token>& prompt, const Strategy& s,
                                   AcceptRule rule, uint64_t seed) {
  std::vector<int> count(static_cast<size_t>(std::pow(kVocab, kLen)), 0);
  for (int trial = 0; trial < kTrials; ++trial) {
    std::mt19937_64 tree_rng(seed ^ (static_cast<uint64_t>(trial) << 20));
    const auto out = Speculate(target, params, prompt, s, rule, TrialSampler(params, seed, trial), tree_rng);
    ++count[CellOf(out, 0)];
  }
  return count;
}

std::vector<SamplingParams> ParamSets() {
  SamplingParams plain;
  plain.temperature = 1.0f;
  SamplingParams cut;  // top-k and top-p leave tokens of probability 0
  cut.temperature = 0.8f;
  cut.top_k = 3;
  cut.top_p = 0.9f;
  return {plain, cut};
}

// Plain sampling, with an Rng stream and with the position-keyed draws, has
// the exact joint distribution.
TEST(VerifyStochasticTest, PlainSamplerMatchesExactJoint) {
  const FakeTarget target(kVocab, 2, 5, 2.5f);
  const std::vector<Token> prompt = {1, 2};
  for (const SamplingParams& params : ParamSets()) {
    const auto exact = ExactJoint(target, params, prompt);
    EXPECT_NEAR(std::accumulate(exact.begin(), exact.end(), 0.0), 1.0, 1e-5);
    std::vector<int> count(exact.size(), 0), keyed(exact.size(), 0);
    Rng rng(77);
    for (int trial = 0; trial < kTrials; ++trial) {
      std::vector<Token> ctx = prompt;
      for (int i = 0; i < kLen; ++i) ctx.push_back(SampleToken(target.DistAfter(ctx, params), rng));
      ++count[CellOf(ctx, prompt.size())];
      ++keyed[CellOf(PlainSample(target, params, prompt, TrialSampler(params, 77, trial)), 0)];
    }
    const ChiSquare c = PearsonTest(exact, count, kTrials);
    EXPECT_TRUE(c.Passes()) << "Rng: chi2 " << c.stat << " critical " << c.critical;
    const ChiSquare k = PearsonTest(exact, keyed, kTrials);
    EXPECT_TRUE(k.Passes()) << "PositionSampler: chi2 " << k.stat << " critical " << k.critical;
  }
}

TEST(VerifyStochasticTest, LosslessForEveryProposalTreeAndBiasedRuleIsDetected) {
  const FakeTarget target(kVocab, 2, 5, 2.5f);
  const std::vector<Token> prompt = {1, 2};
  int set = 0;
  for (const SamplingParams& params : ParamSets()) {
    const auto exact = ExactJoint(target, params, prompt);
    for (const Strategy& s : Strategies(target, params)) {
      const auto ok = SpeculativeCounts(target, params, prompt, s, AcceptRule::kTargetSample, 1 + set);
      const ChiSquare c = PearsonTest(exact, ok, kTrials);
      EXPECT_TRUE(c.Passes()) << s.name << " params " << set << ": chi2 " << c.stat << " critical "
                              << c.critical << " impossible " << c.impossible;
      const auto bad = SpeculativeCounts(target, params, prompt, s, AcceptRule::kBiasedForTest, 1 + set);
      const ChiSquare b = PearsonTest(exact, bad, kTrials);
      EXPECT_FALSE(b.Passes()) << s.name << " params " << set << ": biased rule not detected, chi2 "
                               << b.stat << " critical " << b.critical;
      std::printf("  %-12s params %d: exact chi2 %7.1f, biased chi2 %9.1f (critical %.1f)\n",
                  s.name.c_str(), set, c.stat, b.stat, c.critical);
    }
    ++set;
  }
}

// Whatever the tree, the same seed writes the same tokens as plain sampling: every
// committed token is the target's sample at its position (issue 47: graft = ar at T > 0).
TEST(VerifyStochasticTest, EveryTreeWritesWhatPlainSamplingWrites) {
  const FakeTarget target(kVocab, 2, 5, 2.5f);
  const std::vector<Token> prompt = {3, 0};
  for (const SamplingParams& params : ParamSets()) {
    for (const Strategy& s : Strategies(target, params)) {
      for (int trial = 0; trial < 500; ++trial) {
        const PositionSampler sampler = TrialSampler(params, 11, trial);
        std::mt19937_64 tree_rng(static_cast<uint64_t>(trial));
        ASSERT_EQ(Speculate(target, params, prompt, s, AcceptRule::kTargetSample, sampler, tree_rng),
                  PlainSample(target, params, prompt, sampler))
            << s.name << " trial " << trial;
      }
    }
  }
}

// Proposals are point masses, so the target-sample rule accepts child x with
// probability p(x), as the residual rule did: the same acceptance, measured over
// one-step verifications of each strategy's trees (mean accepted proposals within 4
// standard errors of the residual rule's).
TEST(VerifyStochasticTest, AcceptsAsMuchAsTheResidualRule) {
  const FakeTarget target(kVocab, 2, 5, 2.5f);
  const std::vector<Token> prompt = {1, 2};
  constexpr int kSteps = 40000;
  for (const SamplingParams& params : ParamSets()) {
    for (const Strategy& s : Strategies(target, params)) {
      double sum[2] = {0, 0}, sq[2] = {0, 0};
      Rng rng(5);
      for (int step = 0; step < kSteps; ++step) {
        std::mt19937_64 tree_rng(static_cast<uint64_t>(step));
        const std::vector<Token> ctx = {prompt[0], static_cast<Token>(step % kVocab)};
        const TokenTree tree = s.build(ctx, tree_rng);
        const auto dist = [&](int32_t n) { return target.DistAfter(NodeContext(ctx, tree, n), params); };
        const int a = VerifyStochastic(tree, dist, TrialSampler(params, 9, step), 0).num_accepted_proposals();
        const int b = internal::VerifyResidual(tree, dist, rng).num_accepted_proposals();
        sum[0] += a, sq[0] += a * a, sum[1] += b, sq[1] += b * b;
      }
      const double m0 = sum[0] / kSteps, m1 = sum[1] / kSteps;
      const double se = std::sqrt((sq[0] / kSteps - m0 * m0 + sq[1] / kSteps - m1 * m1) / kSteps);
      std::printf("  %-12s accepted per step: target sample %.4f, residual %.4f (se %.4f)\n", s.name.c_str(), m0,
                  m1, se);
      EXPECT_LE(std::fabs(m0 - m1), std::max(4 * se, 1e-9)) << s.name;
    }
  }
}

// With a greedy (T = 0) target distribution the stochastic verifier is the greedy one.
TEST(VerifyStochasticTest, GreedyDistributionGivesGreedyResult) {
  const FakeTarget target(8, 3, 9, 1.0f, /*quantize=*/true);
  SamplingParams greedy;
  std::mt19937_64 tree_rng(3);
  for (int iter = 0; iter < 300; ++iter) {
    const std::vector<Token> ctx = {static_cast<Token>(iter % 8), static_cast<Token>(iter / 8 % 8)};
    TokenTree t;
    t.Reset(ctx.back());
    for (int i = 0; i < 40 && t.size() < 20; ++i) {
      const int32_t p = static_cast<int32_t>(tree_rng() % t.size());
      // Bias towards the argmax so that paths get accepted.
      const Token tok = (tree_rng() % 2) ? target.ArgmaxAfter(NodeContext(ctx, t, p))
                                         : static_cast<Token>(tree_rng() % 8);
      if (t.FindChild(p, tok) < 0) t.Add(p, tok, 0.5f, Source::kDraft);
    }
    greedy.seed = static_cast<uint64_t>(iter);
    const VerifyResult s = VerifyStochastic(
        t, [&](int32_t n) { return target.DistAfter(NodeContext(ctx, t, n), greedy); }, PositionSampler(greedy), iter);
    const VerifyResult g =
        VerifyGreedy(t, [&](int32_t n) { return target.ArgmaxAfter(NodeContext(ctx, t, n)); });
    EXPECT_EQ(s.accepted, g.accepted);
    EXPECT_EQ(s.bonus, g.bonus);
    EXPECT_EQ(s.tested, g.tested);
    EXPECT_EQ(s.tested_accepted, g.tested_accepted);
  }
}

TEST(VerifyStochasticTest, TestedRecordsEveryChildOfAcceptedNodes) {
  TokenTree t;
  t.Reset(0);
  const int32_t a = t.Add(0, 1, 0.5f, Source::kDraft);
  const int32_t b = t.Add(0, 2, 0.5f, Source::kDraft);
  t.Add(b, 3, 0.5f, Source::kDraft);  // under a rejected node: never tested
  Distribution only1;
  only1.token = {1};
  only1.prob = {1.0f};
  const VerifyResult r = VerifyStochastic(t, [&](int32_t) { return only1; }, PositionSampler(SamplingParams{}), 0);
  EXPECT_EQ(r.accepted, (std::vector<int32_t>{0, a}));
  EXPECT_EQ(r.bonus, 1);
  EXPECT_EQ(r.tested, (std::vector<int32_t>{a, b}));
  EXPECT_EQ(r.tested_accepted, (std::vector<uint8_t>{1, 0}));
}

}  // namespace
}  // namespace graft
