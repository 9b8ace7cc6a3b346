// End-to-end engine tests on real GGUF models: greedy losslessness of every method
// (tiny random pair; and the default Qwen pair when GRAFT_TEST_REAL_PAIR is not 0),
// sampling losslessness (chi-square against ar), reproducibility of graft, and
// bad-input errors. Prompts come from the fixtures in tests/data.
#include <gtest/gtest.h>

#include "common/test_models.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "graft/cost_profile.h"
#include "graft/engine.h"
#include "graft/error.h"
#include "graft/learned_state.h"
#include "graft/retrieval_datastore.h"

namespace graft {
namespace {

using graft::testing::ModelPath;

std::string DataDir() {
  const char* src = std::getenv("GRAFT_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/data";
}

// The first `per_category` first-turn prompts of each Spec-Bench category group.
std::vector<std::string> SpecBenchPrompts(int per_category) {
  std::ifstream in(DataDir() + "/spec_bench/question.jsonl");
  if (!in.good()) ADD_FAILURE() << "missing fixture " << DataDir() << "/spec_bench/question.jsonl";
  std::map<std::string, int> seen;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    std::string cat = j["question_id"].get<int>() <= 160 ? "mt_bench" : j["category"].get<std::string>();
    if (seen[cat]++ < per_category) out.push_back(j["turns"][0].get<std::string>().substr(0, 1500));
  }
  return out;
}

std::vector<Token> Encode(const Model& m, const std::string& text) {
  const std::string s = m.ApplyChatTemplate({{"user", text}}, true);
  return m.Tokenize(s, true, true);
}

// Top-1 minus top-2 target logit after `ctx` (a fresh context).
float GapAfter(const Model& m, const std::vector<Token>& ctx) {
  Context c(m, ContextOptions{.n_ctx = 4096, .n_batch = 512, .n_threads = 2, .n_seq_max = 1, .max_tree = 1});
  const float* l = c.Prefill(ctx, true);
  float a = -INFINITY, b = -INFINITY;
  for (int32_t i = 0; i < m.n_vocab(); ++i) {
    if (l[i] > a) { b = a; a = l[i]; } else if (l[i] > b) { b = l[i]; }
  }
  return a - b;
}

// Largest |logit difference| between a batched pass (a chain of n tokens evaluated
// as one tree, n = 2, 4, 8, 16, 32: the kernel changes at these sizes) and single-token
// decoding of the same tokens, over every vocabulary entry. Two logits can swap
// order between the two ways only if their gap is below twice this. `whole_pass`: also
// the prompt and the chain in one pass (an EngineGroup's steps share their pass with
// prompt chunks, hundreds of rows): on a 2-core AVX-512 EPYC the tiny model's last row
// differed there by up to 0.12 from single-token decoding, where 32-row chains
// differed by 0.005.
float BatchedVsSingleDiff(const Model& m, const std::vector<Token>& prompt, bool whole_pass = false) {
  const ContextOptions co{.n_ctx = 1024, .n_batch = 512, .n_threads = 2, .n_seq_max = 32, .max_tree = 32};
  Context single(m, co);
  const std::vector<Token> prefix(prompt.begin(), prompt.end() - 1);
  single.Prefill(prefix, false);
  // The chain: the prompt's last token, then the model's own greedy continuation.
  std::vector<Token> chain = {prompt.back()};
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 32; ++i) {
    const float* l = single.Prefill(std::vector<Token>{chain.back()}, true);
    rows.emplace_back(l, l + m.n_vocab());
    chain.push_back(static_cast<Token>(std::max_element(l, l + m.n_vocab()) - l));
  }
  float worst = 0;
  for (int n : {2, 4, 8, 16, 32}) {
    Context batched(m, co);
    batched.Prefill(prefix, false);
    TokenTree t;
    t.Reset(chain[0]);
    for (int i = 1; i < n; ++i) t.Add(i - 1, chain[i], 1.0f, Source::kDraft);
    batched.EvalTree(t);
    for (int i = 0; i < n; ++i) {
      const float* l = batched.Logits(i);
      for (int32_t v = 0; v < m.n_vocab(); ++v) worst = std::max(worst, std::fabs(l[v] - rows[i][v]));
    }
  }
  if (!whole_pass) return worst;
  // The prompt and the chain in one pass, its last row against the same token decoded alone.
  std::vector<Token> whole = prefix;
  whole.insert(whole.end(), chain.begin(), chain.end() - 1);  // rows.back() is after chain[31]
  Context one_pass(m, co);
  const float* l = one_pass.Prefill(whole, true);
  const std::vector<float> last(l, l + m.n_vocab());
  for (int32_t v = 0; v < m.n_vocab(); ++v) worst = std::max(worst, std::fabs(last[v] - rows.back()[v]));
  return worst;
}

// The near-tie tolerance of an EngineGroup's streams against ar alone: twice the
// largest BatchedVsSingleDiff(whole_pass) over the requests' prompts (the difference
// depends on the context: 0.00001 to 0.12 over four prompts on the tiny model).
float GroupEpsilon(const Model& m, const std::vector<GenerateRequest>& reqs) {
  float e = 1e-3f;
  for (const GenerateRequest& r : reqs) e = std::max(e, 2 * BatchedVsSingleDiff(m, r.prompt, true));
  return e;
}

// Runs every request through `group`, each started in the first free slot with
// options(k) as soon as one is free, until all have finished; returns each request's
// result. An engine error or more than max_steps steps fails the test. before_step,
// when given, sees the group before each Step().
std::vector<GenerateResult> RunThroughGroup(EngineGroup& group, const std::vector<GenerateRequest>& reqs,
                                            const std::function<DecodeOptions(size_t)>& options, int max_steps,
                                            const std::function<void()>& before_step = nullptr) {
  std::vector<GenerateResult> got(reqs.size());
  std::vector<int32_t> slot_req(group.slots(), -1);
  size_t next = 0;
  for (int steps = 0; next < reqs.size() || !group.idle(); ++steps) {
    if (steps >= max_steps) {
      ADD_FAILURE() << "the group did not finish in " << max_steps << " steps";
      break;
    }
    for (int32_t s = 0; s < group.slots() && next < reqs.size(); ++s) {
      if (group.busy(s)) continue;
      group.Start(s, reqs[next], options(next));
      slot_req[s] = static_cast<int32_t>(next++);
    }
    if (before_step) before_step();
    for (EngineGroup::Finished& f : group.Step()) {
      EXPECT_EQ(f.error, "") << "request " << slot_req[f.slot];
      got[slot_req[f.slot]] = std::move(f.result);
      slot_req[f.slot] = -1;
    }
  }
  return got;
}

struct PairCase {
  std::string target, draft;
  int prompts_per_category;
  int n_predict;
  // A divergence is allowed where the target's top-2 gap is below
  // 2 x BatchedVsSingleDiff (measured in the test), and at most this share of runs may
  // diverge at all.
  double max_divergence_rate;
  double min_chain_tau;  // chain's mean tokens per pass must stay at least this (0 = unchecked)
  // Keep each prompt's cache across its runs (EngineConfig::reuse_prefix). A reused
  // cache was filled in other chunks (prompts share the chat template's first tokens),
  // so its logits differ a little from the fresh context where a divergence's top-2
  // gap is measured.
  bool reuse_prefix;
};

// The decoding options of each run compared with ar, and the name its tau is reported by.
struct Variant {
  std::string name;
  DecodeOptions options;
};

// Every speculative method, and graft with a fixed budget: graft's gate runs the draft
// only where it pays (on a CPU, rarely), while a fixed budget always drafts and grafts
// under the drafted nodes, so that path stays covered on every machine.
std::vector<Variant> VariantsWithGraftFixed();

// Whether `got` equals ar's `ref` for `prompt`; if not, checks that they part where
// the target's top-2 gap is below `epsilon` (a near-tie that batched kernels may flip)
// and not because one stopped earlier. Records the gap in *max_gap.
bool SameOrNearTie(const Model& target, const std::vector<Token>& prompt, const std::vector<Token>& ref,
                   const std::vector<Token>& got, float epsilon, const std::string& name, float* max_gap) {
  if (got == ref) return true;
  size_t k = 0;
  while (k < ref.size() && k < got.size() && ref[k] == got[k]) ++k;
  if (k == ref.size() || k == got.size()) {
    ADD_FAILURE() << name << " output length differs from ar's (" << got.size() << " vs " << ref.size() << ")";
    return false;
  }
  std::vector<Token> ctx = prompt;
  ctx.insert(ctx.end(), ref.begin(), ref.begin() + k);
  const float gap = GapAfter(target, ctx);
  *max_gap = std::max(*max_gap, gap);
  EXPECT_LT(gap, epsilon) << name << " diverged from ar at token " << k << " with a clear top-2 gap " << gap;
  return false;
}

void CheckGreedyLossless(const PairCase& pc, const std::vector<Variant>& variants) {
  auto target = Model::Load(ModelPath(pc.target));
  auto draft = Model::Load(ModelPath(pc.draft));
  const auto prompts = SpecBenchPrompts(pc.prompts_per_category);
  ASSERT_GE(prompts.size(), 20u);
  // A small corpus datastore from the code-edit set, for rest and graft.
  const std::string index = (std::filesystem::temp_directory_path() / ("graft_engine_test_" + std::to_string(getpid()) + ".idx")).string();
  {
    std::ifstream in(DataDir() + "/code_edit/edit_eval.jsonl");
    ASSERT_TRUE(in.good()) << "missing fixture " << DataDir() << "/code_edit/edit_eval.jsonl";
    std::vector<Token> corpus;
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i) {
      auto j = nlohmann::json::parse(line);
      auto t = target->Tokenize(j["input"].get<std::string>(), false, false);
      corpus.insert(corpus.end(), t.begin(), t.end());
      corpus.push_back(kDatastoreSeparator);
    }
    BuildDatastore(corpus, target->VocabFingerprint(), index);
  }
  EngineConfig cfg;
  cfg.n_ctx = 2048;
  cfg.max_tree = 32;
  cfg.index_path = index;
  // Every variant runs the same prompt after ar: reusing the prompt's cache saves all but
  // the first prefill of each prompt (most of this test's time on the default pair) and
  // keeps prefix reuse under the losslessness check.
  cfg.reuse_prefix = pc.reuse_prefix;
  Engine engine(*target, draft.get(), cfg);
  const float epsilon = std::max(1e-3f, 2 * BatchedVsSingleDiff(*target, Encode(*target, prompts[0])));
  int total = 0, diverged = 0;
  float max_gap = 0;  // largest top-2 gap at a divergence
  std::map<std::string, double> tau;
  for (const auto& p : prompts) {
    GenerateRequest req;
    req.prompt = Encode(*target, p);
    req.n_predict = pc.n_predict;
    DecodeOptions ar;
    ar.learn = false;  // keep ar's output out of the history index
    const auto ref = engine.Generate(req, ar).tokens;
    for (const Variant& v : variants) {
      const auto res = engine.Generate(req, v.options);
      tau[v.name] += res.stats.tau() / prompts.size();
      EXPECT_EQ(res.stats.n_generated, static_cast<int32_t>(res.tokens.size()));
      ++total;
      diverged += !SameOrNearTie(*target, req.prompt, ref, res.tokens, epsilon, v.name, &max_gap);
    }
  }
  std::filesystem::remove(index);
  std::string taus;
  for (const auto& [k, v] : tau) taus += " " + k + "=" + std::to_string(v).substr(0, 4);
  printf("[lossless] %s: %d runs, %d diverged at near-ties (largest top-2 gap there %.3f, allowed %.3f); mean tau:%s\n",
         pc.target.c_str(), total, diverged, max_gap, epsilon, taus.c_str());
  EXPECT_LE(diverged, pc.max_divergence_rate * total);
  if (pc.min_chain_tau > 0) {
    EXPECT_GE(tau["chain"], pc.min_chain_tau) << "chain's draft acceptance collapsed";
  }
}

std::vector<Variant> VariantsWithGraftFixed() {
  std::vector<Variant> v;
  for (Method m : AllMethods()) {
    if (m != Method::kAr) v.push_back({MethodName(m), DecodeOptions{.method = m, .tree_budget = 16}});
  }
  v.push_back({"graft-fixed", DecodeOptions{.method = Method::kGraft, .tree_budget = 16, .adaptive = false}});
  return v;
}

TEST(EngineTest, GreedyLosslessTinyPair) {
  // F32 weights: batched and single-token logits agree to 1e-5 up to 16 rows, but a
  // 32-row pass takes another kernel on some CPUs (Intel Xeon, 2026-12-02: 0.0098),
  // and a random network's top-2 gaps are small: graft-fixed's 32-node trees parted
  // from ar once in 216 runs, at a gap of 0.008 (the same on CI, 2026-12-01, where it
  // was first blamed on prefix reuse). Bound: at most 2% of runs part, at near-ties.
  // The tiny draft and target are unrelated random networks: the draft is never
  // accepted (tau 1.00), so its tau is checked with the target as its own draft below.
  CheckGreedyLossless({"tiny-target.gguf", "tiny-draft.gguf", 4, 24, 0.02, 0.0, false}, VariantsWithGraftFixed());
}

// With the target as its own draft every drafted token should be accepted (F32: the
// draft's single-token logits equal the target's batched ones to ~1e-4): a chain of
// draft_max tokens gives tau ~ draft_max + 1. A drafter that loses track of its KV
// cache, or a commit that keeps the wrong cells, drops tau at once.
TEST(EngineTest, ChainWithTheTargetAsDraftAcceptsNearlyAll) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-target.gguf"));
  EngineConfig cfg;
  cfg.n_ctx = 1024;
  cfg.max_tree = 16;
  Engine engine(*target, draft.get(), cfg);
  GenerationStats total;
  for (const std::string& p : SpecBenchPrompts(1)) {
    GenerateRequest req;
    req.prompt = Encode(*target, p);
    req.n_predict = 48;
    DecodeOptions o{.method = Method::kChain, .tree_budget = 8, .draft_max = 6};
    o.learn = false;
    total.Add(engine.Generate(req, o).stats);
  }
  printf("[chain, target as draft] tau %.2f, acceptance %.3f over %d passes\n", total.tau(), total.acceptance(),
         total.n_passes);
  EXPECT_GE(total.acceptance(), 0.95);
  EXPECT_GE(total.tau(), 6.0);
}

// The oracle proposes ar's recorded output. When the output leaves the recording (a
// near-tie resolved the other way; here: 3 foreign tokens spliced into the recording)
// it must re-align on the output's tail instead of proposing the recording shifted,
// which would be rejected every step from there on.
// ar's output of n tokens for the first Spec-Bench prompt, the recording an oracle test
// proposes; `req` is left holding that prompt.
std::vector<Token> ArRecording(Engine& engine, const Model& target, int32_t n, GenerateRequest* req) {
  req->prompt = Encode(target, SpecBenchPrompts(1).at(0));
  req->n_predict = n;
  return engine.Generate(*req, DecodeOptions{.method = Method::kAr}).tokens;
}

TEST(EngineTest, OracleReAlignsAfterADivergence) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  Engine engine(*target, nullptr, EngineConfig{.n_ctx = 1024, .max_tree = 16});
  GenerateRequest req;
  const std::vector<Token> ar = ArRecording(engine, *target, 64, &req);
  ASSERT_EQ(ar.size(), 64u);
  const DecodeOptions o{.method = Method::kOracle, .tree_budget = 8};
  req.oracle = ar;
  const GenerateResult exact = engine.Generate(req, o);
  req.oracle.assign(ar.begin(), ar.begin() + 10);
  for (Token t : {ar[0] + 1, ar[1] + 1, ar[2] + 1}) req.oracle.push_back(t);
  req.oracle.insert(req.oracle.end(), ar.begin() + 10, ar.end());
  const GenerateResult spliced = engine.Generate(req, o);
  EXPECT_EQ(exact.tokens, ar);
  EXPECT_EQ(spliced.tokens, ar);
  printf("[oracle] tau %.2f exact, %.2f with a spliced recording\n", exact.stats.tau(), spliced.stats.tau());
  EXPECT_GE(exact.stats.tau(), 7.0);
  // Shifted by 3 from token 10 on, a non-aligning oracle gets ~10 tokens in 2 passes
  // and then one per pass (tau ~1.3); re-aligned, it loses a few passes around the splice.
  EXPECT_GE(spliced.stats.tau(), 4.0);
}

// A step keeps at most the tokens left before n_predict, so no node grows deeper than
// that: with the recording as the tree (the oracle), n_predict = k <= the budget takes
// one pass over exactly k nodes, the last one at depth k - 1.
TEST(EngineTest, NoNodeDeeperThanTheTokensLeft) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  Engine engine(*target, nullptr, EngineConfig{.n_ctx = 1024, .max_tree = 16});
  GenerateRequest req;
  const std::vector<Token> ar = ArRecording(engine, *target, 16, &req);
  ASSERT_EQ(ar.size(), 16u);
  req.oracle = ar;
  const DecodeOptions o{.method = Method::kOracle, .tree_budget = 8};
  for (int32_t k : {1, 2, 3, 5, 8, 9, 12}) {
    req.n_predict = k;
    const GenerateResult r = engine.Generate(req, o);
    SCOPED_TRACE(::testing::Message() << "n_predict " << k);
    EXPECT_EQ(r.tokens, std::vector<Token>(ar.begin(), ar.begin() + k));
    // 8 tokens a full pass, then a pass over what is left.
    EXPECT_EQ(r.stats.n_passes, k <= 8 ? 1 : 2);
    EXPECT_EQ(r.stats.nodes_verified, k);
  }
}

// A long prompt's prefill stops at the first chunk boundary once `cancelled` says so,
// and the engine serves the next request as if nothing had happened.
TEST(EngineTest, PrefillIsCancellableBetweenChunks) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  Engine engine(*target, nullptr, EngineConfig{.n_ctx = 2048, .max_tree = 16});
  std::string text;
  for (const std::string& p : SpecBenchPrompts(2)) text += p + "\n";
  GenerateRequest req;
  req.prompt = Encode(*target, text);
  ASSERT_GT(req.prompt.size(), 1100u);  // three prefill chunks of 512
  req.prompt.resize(1500);
  req.n_predict = 8;
  int polls = 0;
  req.cancelled = [&polls] { return ++polls >= 1; };
  const GenerateResult stopped = engine.Generate(req, DecodeOptions{});
  EXPECT_EQ(polls, 1);
  EXPECT_EQ(stopped.stats.stop_reason, "cancelled");
  EXPECT_TRUE(stopped.tokens.empty());
  req.cancelled = nullptr;
  const GenerateResult after = engine.Generate(req, DecodeOptions{});
  Engine fresh(*target, nullptr, EngineConfig{.n_ctx = 2048, .max_tree = 16});
  EXPECT_EQ(after.tokens, fresh.Generate(req, DecodeOptions{}).tokens);
  EXPECT_EQ(after.tokens.size(), 8u);
}

TEST(EngineTest, GreedyLosslessDefaultPair) {
  const char* env = std::getenv("GRAFT_TEST_REAL_PAIR");
  if (env != nullptr && std::string(env) == "0") GTEST_SKIP() << "GRAFT_TEST_REAL_PAIR=0";
  // Q4_K: batched and single-token passes differ by up to ~0.65 in a logit here, so
  // greedy outputs may part where the top-2 gap is below twice that. Measured runs of
  // this test: 41 of 192 runs parted (AMD EPYC, before the proposer redesign) and 46 of
  // 192 (Intel Xeon, 2026-11-30), every one at a gap below 0.34; chain's tau was 3.60.
  // Bounds: at most 35% of runs may part, and chain keeps tau >= 2.5.
  CheckGreedyLossless({"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 4, 16,
                       0.35, 2.5, true},
                      VariantsWithGraftFixed());
}

// Same models + same requests + same seed + same cost profile -> the same tokens,
// greedy and sampled, for graft (whose policy used to follow wall-clock timings).
// Two fresh engines run the same sequence of requests, so what they learn along the
// way (calibration, history, the draft gate) must evolve identically too.
void CheckReproducible(const std::string& target_file, const std::string& draft_file, int n_predict) {
  auto target = Model::Load(ModelPath(target_file));
  auto draft = Model::Load(ModelPath(draft_file));
  const auto prompts = SpecBenchPrompts(1);
  ASSERT_GE(prompts.size(), 6u);
  auto run = [&] {
    EngineConfig cfg;
    cfg.n_ctx = 2048;
    cfg.max_tree = 32;
    Engine engine(*target, draft.get(), cfg);
    // Tokens, then the decisions behind them: passes, nodes verified, draft steps.
    std::vector<std::vector<Token>> out;
    for (float temp : {0.0f, 0.8f}) {
      for (size_t i = 0; i < 3; ++i) {
        GenerateRequest req;
        req.prompt = Encode(*target, prompts[i]);
        req.n_predict = n_predict;
        req.sampling.temperature = temp;
        req.sampling.seed = 1234 + i;
        const GenerateResult r = engine.Generate(req, DecodeOptions{.method = Method::kGraft});
        out.push_back(r.tokens);
        out.push_back({r.stats.n_passes, static_cast<Token>(r.stats.nodes_verified), r.stats.n_draft_steps});
      }
    }
    return out;
  };
  const auto a = run();
  const auto b = run();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i += 2) {
    const std::string what = "request " + std::to_string(i / 2) + (i < 6 ? " (greedy)" : " (T = 0.8)");
    EXPECT_GE(a[i].size(), 8u) << what << " gave almost nothing to compare";
    EXPECT_EQ(a[i], b[i]) << what << ": tokens differ between runs";
    EXPECT_EQ(a[i + 1], b[i + 1]) << what << ": passes / nodes verified / draft steps differ between runs";
  }
}

TEST(EngineTest, GraftIsReproducibleTinyPair) { CheckReproducible("tiny-target.gguf", "tiny-draft.gguf", 48); }

TEST(EngineTest, GraftIsReproducibleDefaultPair) {
  const char* env = std::getenv("GRAFT_TEST_REAL_PAIR");
  if (env != nullptr && std::string(env) == "0") GTEST_SKIP() << "GRAFT_TEST_REAL_PAIR=0";
  CheckReproducible("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 24);
}

// Two-sample chi-square over the joint distribution of the first two tokens.
double ChiSquare(const std::map<std::pair<Token, Token>, int>& a, const std::map<std::pair<Token, Token>, int>& b,
                 int na, int nb, int* dof) {
  std::map<std::pair<Token, Token>, std::pair<int, int>> cells;
  for (auto& [k, v] : a) cells[k].first += v;
  for (auto& [k, v] : b) cells[k].second += v;
  // Pool rare cells (expected < 5) into one.
  std::pair<int, int> rare{0, 0};
  double chi = 0;
  *dof = -1;
  auto add = [&](int x, int y) {
    const double tot = x + y;
    const double ex = tot * na / (na + nb), ey = tot * nb / (na + nb);
    chi += (x - ex) * (x - ex) / ex + (y - ey) * (y - ey) / ey;
    ++*dof;
  };
  for (auto& [k, v] : cells) {
    if (v.first + v.second < 10) { rare.first += v.first; rare.second += v.second; continue; }
    add(v.first, v.second);
  }
  if (rare.first + rare.second > 0) add(rare.first, rare.second);
  return chi;
}

TEST(EngineTest, SamplingMatchesArDistribution) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-draft.gguf"));
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.max_tree = 16;
  Engine engine(*target, draft.get(), cfg);
  GenerateRequest req;
  req.prompt = target->Tokenize("the the the cat sat on the mat and the cat", true, false);
  req.n_predict = 2;
  req.sampling.temperature = 3.0f;
  req.sampling.top_k = 8;
  const int kTrials = 1500;
  auto sample = [&](Method m) {
    std::map<std::pair<Token, Token>, int> h;
    DecodeOptions o;
    o.method = m;
    o.tree_budget = 8;
    o.learn = false;  // identical conditions for every trial
    for (int i = 0; i < kTrials; ++i) {
      req.sampling.seed = 1000003ull * (i + 1) + static_cast<uint64_t>(m);
      auto r = engine.Generate(req, o);
      if (r.tokens.size() == 2) ++h[{r.tokens[0], r.tokens[1]}];
    }
    return h;
  };
  const auto ref = sample(Method::kAr);
  for (Method m : {Method::kChain, Method::kTree, Method::kPruned, Method::kPld, Method::kSuffix, Method::kGraft}) {
    const auto got = sample(m);
    int na = 0, nb = 0, dof = 0;
    for (auto& [k, v] : ref) na += v;
    for (auto& [k, v] : got) nb += v;
    const double chi = ChiSquare(ref, got, na, nb, &dof);
    // 99.9% quantile of chi-square ~ dof + 3.1 sqrt(2 dof) + 5 (Wilson-Hilferty, loose).
    const double limit = dof + 3.1 * std::sqrt(2.0 * dof) + 5;
    printf("[sampling] %s: chi2 %.1f, dof %d, limit %.1f\n", MethodName(m).c_str(), chi, dof, limit);
    EXPECT_LT(chi, limit) << MethodName(m);
    EXPECT_GE(dof, 3) << "distribution too peaked to test";
  }
}

// Where a sampled output parts from ar's: the distance, in probability, from position
// k's uniform to the nearer end of the interval its token takes in the inverse CDF of
// the target's distribution after prompt + ref[0..k) (computed in a fresh context).
double SampleMarginAt(const Model& m, const std::vector<Token>& prompt, const std::vector<Token>& ref, size_t k,
                      const SamplingParams& sp) {
  std::vector<Token> ctx = prompt;
  ctx.insert(ctx.end(), ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(k));
  Context c(m, ContextOptions{.n_ctx = 4096, .n_batch = 512, .n_threads = 2, .n_seq_max = 1, .max_tree = 1});
  const Distribution d = MakeDistribution(c.Prefill(ctx, true), m.n_vocab(), sp);
  std::vector<std::pair<Token, float>> by_id;
  for (int32_t i = 0; i < d.size(); ++i) by_id.emplace_back(d.token[i], d.prob[i]);
  std::sort(by_id.begin(), by_id.end());
  double total = 0;
  for (const auto& e : by_id) total += e.second;
  const double u = PositionSampler(sp).Uniform(static_cast<int64_t>(k)) * total;
  double lo = 0;
  for (const auto& e : by_id) {
    const double hi = lo + e.second;
    if (u < hi) return std::min(u - lo, hi - u) / total;
    lo = hi;
  }
  return 0;
}

// The sampling near-tie of logits that two ways of computing them round up to
// `epsilon` apart: a boundary of the inverse CDF moves by at most about
// (e^(2 epsilon / T) - 1) / 4 (the tokens before it up by epsilon, the rest down).
double SampleMarginBound(float epsilon, float temperature) {
  return (std::exp(2.0 * epsilon / temperature) - 1) / 4;
}

// SameOrNearTie at T > 0: whether `got` equals ar's `ref` for the same seed; if not,
// checks that they part where position k's uniform lies within `bound` of a boundary
// of the inverse CDF (a sampling near-tie), not because one stopped earlier. Records
// the margin in *max_margin.
bool SameOrSamplingNearTie(const Model& target, const GenerateRequest& req, const std::vector<Token>& ref,
                           const std::vector<Token>& got, double bound, const std::string& name,
                           double* max_margin) {
  if (got == ref) return true;
  size_t k = 0;
  while (k < ref.size() && k < got.size() && ref[k] == got[k]) ++k;
  if (k == ref.size() || k == got.size()) {
    ADD_FAILURE() << name << " output length differs from ar's (" << got.size() << " vs " << ref.size() << ")";
    return false;
  }
  const double margin = SampleMarginAt(target, req.prompt, ref, k, req.sampling);
  *max_margin = std::max(*max_margin, margin);
  EXPECT_LT(margin, bound) << name << " parted from ar at token " << k << " with a clear sampling margin " << margin;
  return false;
}

// Issue 47: at T > 0 every method writes what ar writes with the same seed, whatever
// its trees and whatever the engine learnt before, up to sampling near-ties: on the tiny
// F32 pair a pass of 3 rows computes a logit up to 0.02 away from a 1-row pass (2-core
// AMD EPYC, 2026-12-07), which moves the inverse CDF's boundaries by up to ~0.01; of
// 60 runs here, the 8 of one prompt parted, all at the same token, at a margin of 0.003. The target is its own
// draft, so drafted tokens are accepted often (about 40%) and both acceptance and
// rejection run; graft runs twice more with learning on, each from what the runs
// before learnt; the oracle proposing ar's sampled output has all of it accepted.
TEST(EngineTest, SampledMethodsWriteWhatArWritesTinyPair) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-target.gguf"));
  Engine engine(*target, draft.get(), EngineConfig{.n_ctx = 1024, .max_tree = 16});
  const auto prompts = SpecBenchPrompts(1);
  ASSERT_GE(prompts.size(), 6u);
  int64_t accepted = 0, proposed = 0;
  int runs = 0, parted = 0;
  double max_margin = 0, bound = 0;
  for (size_t i = 0; i < 6; ++i) {
    GenerateRequest req;
    req.prompt = Encode(*target, prompts[i]);
    if (req.prompt.size() > 300) req.prompt.resize(300);
    req.n_predict = 40;
    req.sampling = SamplingParams{.temperature = 0.8f, .top_p = 0.95f, .seed = 4700 + i};
    const double prompt_bound =
        SampleMarginBound(std::max(1e-3f, 2 * BatchedVsSingleDiff(*target, req.prompt)), req.sampling.temperature);
    bound = std::max(bound, prompt_bound);
    const GenerateResult ar = engine.Generate(req, DecodeOptions{.learn = false});
    ASSERT_EQ(ar.stats.seed, req.sampling.seed);
    ASSERT_GE(ar.tokens.size(), 8u);
    std::vector<Variant> variants;
    for (const Variant& v : VariantsWithGraftFixed()) {
      if (v.options.method != Method::kRest) variants.push_back(v);  // rest needs an index; suffix retrieves
    }
    for (int k = 0; k < 2; ++k) variants.push_back({"graft-learning", DecodeOptions{.method = Method::kGraft}});
    for (const Variant& v : variants) {
      const GenerateResult got = engine.Generate(req, v.options);
      parted += !SameOrSamplingNearTie(*target, req, ar.tokens, got.tokens, prompt_bound,
                                       v.name + ", prompt " + std::to_string(i), &max_margin);
      accepted += got.stats.n_accepted;
      proposed += got.stats.n_drafted + got.stats.n_grafted;
      ++runs;
    }
    GenerateRequest oracle = req;
    oracle.oracle = ar.tokens;
    const GenerateResult o = engine.Generate(oracle, DecodeOptions{.method = Method::kOracle, .tree_budget = 16});
    if (SameOrSamplingNearTie(*target, req, ar.tokens, o.tokens, prompt_bound, "oracle, prompt " + std::to_string(i),
                              &max_margin)) {
      EXPECT_EQ(o.stats.n_accepted, o.stats.n_grafted) << "the oracle proposes ar's samples: all accepted";
      EXPECT_GT(o.stats.n_accepted, 0);
    }
  }
  printf("[sampled = ar] %d runs at T = 0.8, top-p 0.95: %d parted from ar, at sampling near-ties (largest margin "
         "there %.4f, allowed %.4f); %lld of %lld proposals accepted\n",
         runs, parted, max_margin, bound, static_cast<long long>(accepted), static_cast<long long>(proposed));
  EXPECT_LE(parted, runs / 4);
  EXPECT_GT(accepted * 4, proposed) << "too few acceptances to test";
}

// The same under continuous batching: 8 seeded requests on 4 slots (graft, ar, chain,
// suffix), sharing their passes with each other and with prompt chunks, write what ar
// alone writes with their seeds, up to sampling near-ties; a pass that holds prompt
// chunks rounds the tiny model's logits by up to 0.12 (GroupEpsilon), so more part
// here than alone: 1 of 8 at a margin of 0.006 (2-core AMD EPYC, 2026-12-07).
TEST(EngineGroupTest, SampledStreamsEqualArAloneTinyPair) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-target.gguf"));
  const EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  const size_t n = 8;
  ASSERT_GE(texts.size(), 6u);
  Engine alone(*target, nullptr, cfg);
  std::vector<GenerateRequest> reqs(n);
  std::vector<std::vector<Token>> ref(n);
  for (size_t k = 0; k < n; ++k) {
    reqs[k].prompt = Encode(*target, texts[k % texts.size()]);
    if (reqs[k].prompt.size() > 300) reqs[k].prompt.resize(300);
    reqs[k].n_predict = 32;
    reqs[k].sampling = SamplingParams{.temperature = 0.8f, .top_p = 0.95f, .seed = 91 + k % 3};
    ref[k] = alone.Generate(reqs[k], DecodeOptions{.learn = false}).tokens;
  }
  const double bound = SampleMarginBound(GroupEpsilon(*target, reqs), 0.8f);
  const std::vector<Method> methods = {Method::kGraft, Method::kAr, Method::kChain, Method::kSuffix};
  EngineGroup group(*target, draft.get(), cfg, {.slots = 4});
  const std::vector<GenerateResult> results = RunThroughGroup(
      group, reqs,
      [&](size_t k) { return DecodeOptions{.method = methods[k % methods.size()], .tree_budget = 16}; }, 5000);
  std::vector<std::vector<Token>> got(n);
  for (size_t k = 0; k < n; ++k) {
    EXPECT_EQ(results[k].stats.seed, reqs[k].sampling.seed);
    got[k] = results[k].tokens;
  }
  int parted = 0;
  double max_margin = 0;
  for (size_t k = 0; k < n; ++k) {
    parted += !SameOrSamplingNearTie(*target, reqs[k], ref[k], got[k], bound,
                                     "request " + std::to_string(k) + " (" +
                                         MethodName(methods[k % methods.size()]) + ")",
                                     &max_margin);
  }
  printf("[group, T = 0.8] %d of %zu streams parted from ar alone, at sampling near-ties (largest margin there "
         "%.4f, allowed %.4f)\n", parted, n, max_margin, bound);
  EXPECT_LE(parted, 2);
}

TEST(EngineTest, BadOptionsGiveClearErrors) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  EngineConfig cfg;
  cfg.n_ctx = 128;
  cfg.max_tree = 16;
  Engine no_draft(*target, nullptr, cfg);
  GenerateRequest req;
  req.prompt = target->Tokenize("hello", true, false);
  req.n_predict = 4;
  auto expect_error = [&](Engine& e, DecodeOptions o, const std::string& needle) {
    try {
      e.Generate(req, o);
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  EXPECT_THROW(ParseMethod("medusa"), Error);
  expect_error(no_draft, DecodeOptions{.method = Method::kGraft}, "draft model");
  expect_error(no_draft, DecodeOptions{.method = Method::kRest}, "--index");
  expect_error(no_draft, DecodeOptions{.method = Method::kSuffix, .tree_budget = 0}, "at least 1");
  expect_error(no_draft, DecodeOptions{.method = Method::kSuffix, .tree_budget = 17}, "exceeds");
  // NaN passes any `v < lo || v > hi` check (CLI11's Range among them); each knob
  // names itself instead of failing deep in the step or steering the policy silently.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_error(no_draft, DecodeOptions{.method = Method::kSuffix, .draft_p_min = nan}, "draft p-min");
  DecodeOptions bad;
  bad.prune.min_accept_prob = nan;
  expect_error(no_draft, bad, "prune p-min");
  bad = DecodeOptions{};
  bad.max_loss = nan;
  expect_error(no_draft, bad, "max-loss");
  bad = DecodeOptions{};
  bad.loss_prefill = 2;
  expect_error(no_draft, bad, "loss-prefill");
  bad = DecodeOptions{};
  bad.skip_draft_gain = -1;
  expect_error(no_draft, bad, "skip-draft-gain");
  req.sampling.temperature = nan;
  expect_error(no_draft, DecodeOptions{}, "temperature");
  req.sampling.temperature = std::numeric_limits<float>::infinity();
  expect_error(no_draft, DecodeOptions{}, "temperature");
  req.sampling = SamplingParams{.temperature = 0.8f, .top_p = nan};
  expect_error(no_draft, DecodeOptions{}, "top-p");
  req.sampling = SamplingParams{};
  EXPECT_NO_THROW(no_draft.Generate(req, DecodeOptions{.max_loss = -1}));  // < 0: no bound, still valid
  req.prompt.assign(1000, 300);
  expect_error(no_draft, DecodeOptions{}, "context");
  EXPECT_THROW(Engine(*target, nullptr, EngineConfig{.index_path = "/nonexistent/index"}), Error);
}


// Continuous batching: requests decoded together in one EngineGroup equal, token for
// token, what an engine gives each alone (greedy; the tiny F32 target has no near-tie
// flips), while they join mid-stream, prefill in chunks beside others' trees, mix
// methods (draft ones with a draft cache per slot), and one is cancelled by its
// stream and one before its first token.
TEST(EngineGroupTest, StreamsEqualTheirSingleEngineOutputs) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-draft.gguf"));
  const EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  ASSERT_GE(texts.size(), 6u);
  const std::vector<Method> methods = {Method::kAr,   Method::kGraft, Method::kPld,   Method::kSuffix,
                                       Method::kChain, Method::kGraft, Method::kPruned, Method::kRecycle};
  const size_t n = std::min(texts.size(), methods.size());
  Engine alone(*target, nullptr, cfg);
  std::vector<GenerateRequest> reqs(n);
  std::vector<GenerateResult> ref(n);
  for (size_t k = 0; k < n; ++k) {
    reqs[k].prompt = Encode(*target, texts[k]);
    if (reqs[k].prompt.size() > 300) reqs[k].prompt.resize(300);
    reqs[k].n_predict = 16 + 4 * static_cast<int32_t>(k);
    ref[k] = alone.Generate(reqs[k], DecodeOptions{.learn = false});
  }
  const size_t kStreamCancel = 1, kEarlyCancel = 4;
  std::vector<std::vector<Token>> streamed(n);
  for (size_t k = 0; k < n; ++k) {
    reqs[k].on_tokens = [&streamed, k](const std::vector<Token>& t) {
      streamed[k].insert(streamed[k].end(), t.begin(), t.end());
      return !(k == kStreamCancel && streamed[k].size() >= 6);
    };
  }
  reqs[kEarlyCancel].cancelled = [] { return true; };

  EngineGroup group(*target, draft.get(), cfg, {.slots = 3, .prefill_chunk = 48});
  int32_t steps = 0, busiest = 0;
  std::vector<GenerateResult> got = RunThroughGroup(
      group, reqs, [&](size_t k) { return DecodeOptions{.method = methods[k], .tree_budget = 16}; }, 5000, [&] {
        ++steps;
        int32_t busy = 0;
        for (int32_t s = 0; s < group.slots(); ++s) busy += group.busy(s);
        busiest = std::max(busiest, busy);
      });
  EXPECT_EQ(busiest, 3);
  int32_t passes = 0;
  for (size_t k = 0; k < n; ++k) {
    const GenerateResult& r = got[k];
    passes += r.stats.n_passes;
    EXPECT_EQ(r.stats.n_generated, static_cast<int32_t>(r.tokens.size()));
    if (k == kEarlyCancel) {
      EXPECT_EQ(r.stats.stop_reason, "cancelled");
      EXPECT_TRUE(r.tokens.empty());
      continue;
    }
    EXPECT_EQ(streamed[k], r.tokens) << "request " << k;
    if (k == kStreamCancel) {
      EXPECT_EQ(r.stats.stop_reason, "cancelled");
      ASSERT_GE(r.tokens.size(), 6u);
      EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), ref[k].tokens.begin())) << "request " << k;
      continue;
    }
    EXPECT_EQ(r.tokens, ref[k].tokens) << "request " << k << " (" << MethodName(methods[k]) << ")";
    EXPECT_EQ(r.stats.stop_reason, ref[k].stats.stop_reason) << "request " << k;
  }
  // The passes were shared: fewer steps than the requests' target passes together,
  // although every prompt also took several prefill steps.
  EXPECT_LT(steps, passes);
  printf("[group] %zu requests on 3 slots: %d steps for %d target passes\n", n, steps, passes);
}

// Prompt caching in a group (GenerateRequest::reuse_prefix, by default
// EngineConfig::reuse_prefix; the server's cache_prompt): a conversation's next turn,
// which repeats the first turn's prompt and answer, finds them in the cache of the slot
// that served the first turn and nowhere else, prefills only what is new when it reuses
// its prefix, and gives what an uncached engine gives (the tiny F32 target has no
// near-tie flips). A request that does not reuse keeps nothing.
TEST(EngineGroupTest, ANextTurnFindsItsFirstTurnInItsSlotsCache) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  ASSERT_GE(texts.size(), 2u);
  GenerateRequest first;
  first.prompt = Encode(*target, texts[0]);
  if (first.prompt.size() > 200) first.prompt.resize(200);
  first.n_predict = 12;
  struct Mode {
    bool config;                // EngineConfig::reuse_prefix
    std::optional<bool> asks;   // the next turn's GenerateRequest::reuse_prefix
  };
  for (const Mode mode : {Mode{true, {}}, Mode{false, {}}, Mode{false, true}, Mode{true, false}}) {
    const bool cache = mode.asks.value_or(mode.config);
    EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
    cfg.reuse_prefix = mode.config;
    EngineGroup group(*target, nullptr, cfg, {.slots = 2, .prefill_chunk = 64});
    const auto run = [&](int32_t slot, const GenerateRequest& req) {
      group.Start(slot, req, DecodeOptions{.method = Method::kSuffix, .tree_budget = 8});
      GenerateResult out;
      for (int steps = 0; !group.idle(); ++steps) {
        for (EngineGroup::Finished& f : group.Step()) out = std::move(f.result);
        if (steps > 1000) ADD_FAILURE() << "no end";
      }
      return out;
    };
    const GenerateResult a = run(1, first);
    ASSERT_EQ(a.stats.stop_reason, "length");
    EXPECT_EQ(a.stats.n_prompt_cached, 0);
    GenerateRequest next;
    next.prompt = first.prompt;
    next.prompt.insert(next.prompt.end(), a.tokens.begin(), a.tokens.end());
    const std::vector<Token> more = Encode(*target, texts[1]);
    next.prompt.insert(next.prompt.end(), more.begin(), more.begin() + std::min<size_t>(more.size(), 40));
    next.n_predict = 12;
    next.reuse_prefix = mode.asks;
    // The cache holds the prompt and every answer token but the last (emitted, never
    // evaluated); the other slot holds nothing.
    const int32_t held = static_cast<int32_t>(first.prompt.size() + a.tokens.size()) - 1;
    EXPECT_EQ(group.CachedPrefix(1, next.prompt), held);
    EXPECT_EQ(group.CachedPrefix(0, next.prompt), 0);
    const GenerateResult b = run(1, next);
    EXPECT_EQ(b.stats.n_prompt_cached, cache ? held : 0);
    EXPECT_EQ(b.stats.n_prompt, static_cast<int32_t>(next.prompt.size()));
    Engine alone(*target, nullptr, EngineConfig{.n_ctx = 1024, .max_tree = 16});
    EXPECT_EQ(b.tokens, alone.Generate(next, DecodeOptions{.method = Method::kAr, .learn = false}).tokens)
        << "cache " << cache;
  }
}

// Drafts batched across requests: four drafting requests on four slots, with the
// target as its own draft (so nearly every drafted token is accepted, and a draft cache
// that lost track of its lane's tokens would show at once). Every stream equals its
// plain-decoding output (up to a near-tie), drafts about as well as alone (tau), and
// the group runs far fewer draft passes than the requests took part in.
TEST(EngineGroupTest, DraftsShareTheirPasses) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-target.gguf"));
  const EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  DecodeOptions graft_fixed{.method = Method::kGraft, .tree_budget = 8};
  graft_fixed.adaptive = false;
  const std::vector<DecodeOptions> options = {{.method = Method::kChain, .tree_budget = 8},
                                              {.method = Method::kTree, .tree_budget = 8},
                                              {.method = Method::kPruned, .tree_budget = 8}, graft_fixed};
  const size_t n = options.size();
  ASSERT_GE(texts.size(), n);
  std::vector<GenerateRequest> reqs(n);
  std::vector<GenerateResult> ar(n), alone(n);
  for (size_t k = 0; k < n; ++k) {
    reqs[k].prompt = Encode(*target, texts[k]);
    if (reqs[k].prompt.size() > 200) reqs[k].prompt.resize(200);
    reqs[k].n_predict = 40;
    Engine plain(*target, draft.get(), cfg);
    ar[k] = plain.Generate(reqs[k], DecodeOptions{.learn = false});
    Engine own(*target, draft.get(), cfg);
    alone[k] = own.Generate(reqs[k], options[k]);
  }
  EngineGroup group(*target, draft.get(), cfg, {.slots = static_cast<int32_t>(n)});
  for (size_t k = 0; k < n; ++k) group.Start(static_cast<int32_t>(k), reqs[k], options[k]);
  std::vector<GenerateResult> got(n);
  for (int steps = 0; !group.idle(); ++steps) {
    ASSERT_LT(steps, 500);
    for (EngineGroup::Finished& f : group.Step()) {
      EXPECT_EQ(f.error, "") << "request " << f.slot;
      got[f.slot] = std::move(f.result);
    }
  }
  // A random network's top-2 gaps can be tiny, and the first steps share their pass
  // with the prompts' chunks (another kernel): a stream may part from ar's at a near-tie.
  const float epsilon = GroupEpsilon(*target, reqs);
  int64_t took_part = 0;
  int parted = 0;
  float max_gap = 0;
  double most_draft_ms = 0;
  for (size_t k = 0; k < n; ++k) {
    const GenerationStats& st = got[k].stats;
    most_draft_ms = std::max(most_draft_ms, st.t_draft_ms);
    const std::string name = MethodName(options[k].method) + " (request " + std::to_string(k) + ")";
    parted += !SameOrNearTie(*target, reqs[k].prompt, ar[k].tokens, got[k].tokens, epsilon, name, &max_gap);
    EXPECT_GT(st.n_draft_steps, 0) << name;
    // A lane whose draft cache held another lane's tokens, or drafts read from another
    // lane's rows, would propose garbage: tau would fall to about 1.
    EXPECT_GT(st.tau(), 0.8 * alone[k].stats.tau()) << name << ": drafts worse than alone";
    if (options[k].method == Method::kChain) {
      EXPECT_GT(st.acceptance(), 0.9) << name;
    }
    int64_t rows = 0;
    for (int32_t c : st.draft_pass_rows) rows += c;
    EXPECT_EQ(rows, st.n_draft_passes) << name;
    took_part += st.n_draft_passes;
    printf("[group drafts] %s: tau %.2f (alone %.2f)\n", name.c_str(), st.tau(), alone[k].stats.tau());
  }
  EXPECT_LE(parted, 1) << "largest top-2 gap where a stream parted: " << max_gap;
  EXPECT_GT(group.draft_passes(), 0);
  EXPECT_LT(group.draft_passes() * 2, took_part);
  // The group's own time counts each shared pass once; a request waited for every
  // shared draft pass it took part in, so the group drafted at least as long as any.
  EXPECT_GT(group.target_pass_ms(), 0.0);
  EXPECT_GE(group.draft_ms(), most_draft_ms);
  printf("[group drafts] %zu drafting requests: %lld shared draft passes for %lld taken part in\n", n,
         static_cast<long long>(group.draft_passes()), static_cast<long long>(took_part));
}

// A folder of its own under the temp folder, removed when it goes out of scope.
struct TempDir {
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

// A made-up cost profile for (target, draft) under `cfg`, written where `cfg`'s engines
// look for theirs, so graft's policy takes its decisions from these curves.
// `verify_long_ms`, when given: the target's passes at the long prefix (every size).
// With cfg.lazy_logits a row read after the root costs `read_row_ms` (made-up
// machines: nearly nothing, so only the curves decide).
void WriteProfile(const Model& target, const Model* draft, const EngineConfig& cfg,
                  const std::function<double(int32_t)>& verify_ms, const std::function<double(int32_t)>& draft_ms,
                  const std::function<double(int32_t)>& verify_long_ms = nullptr, double read_row_ms = 0.001) {
  const CostProfileOptions o = CostProfileOptionsOf(cfg);
  CostProfile p;
  p.read_row_ms = cfg.lazy_logits ? read_row_ms : 0.0;
  p.key = CostProfileKey(target, draft, o);
  p.measured_at = "2026-12-02T00:00:00Z";
  p.prefix = o.prefix;
  p.long_prefix = o.long_prefix;
  p.verify_ms.assign(o.max_rows + 1, 0.0);
  for (int32_t n = 1; n <= o.max_rows; ++n) p.verify_ms[n] = verify_ms(n);
  p.draft_ms.assign(o.max_draft_rows + 1, 0.0);
  for (int32_t n = 1; n <= o.max_draft_rows; ++n) p.draft_ms[n] = draft_ms(n);
  if (verify_long_ms) {
    p.verify_ms_long.assign(o.max_rows + 1, 0.0);
    for (int32_t n = 1; n <= o.max_rows; ++n) p.verify_ms_long[n] = verify_long_ms(n);
  }
  SaveCostProfile(p, o);
}

// Under load graft's adaptive policy only offers its draft, and the group takes the
// offers when the whole step gains (ChooseDrafts). Four graft requests, the tiny target
// as its own draft (so drafts are nearly always right), on two made-up machines:
// - "gpu": a target pass costs the same up to 16 rows and a draft pass a tenth of it.
//   The requests draft together, in shared passes.
// - "block": target rows are free up to 4 and cost a whole pass each beyond, a draft
//   pass a fifth of one. A draft pays for a request alone in the pass, not beside
//   others: the group declines the offers.
// Every stream equals its ar output (up to a near-tie) either way.
TEST(EngineGroupTest, AdaptiveGraftDraftsUnderLoadOnlyWhereTheStepGains) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-target.gguf"));
  const TempDir dir("graft_group_profiles");
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  const size_t n = 4;
  ASSERT_GE(texts.size(), n);
  std::vector<GenerateRequest> reqs(n);
  std::vector<GenerateResult> ar(n);
  for (size_t k = 0; k < n; ++k) {
    reqs[k].prompt = Encode(*target, texts[k]);
    if (reqs[k].prompt.size() > 120) reqs[k].prompt.resize(120);
    reqs[k].n_predict = 40;
    Engine plain(*target, nullptr, EngineConfig{.n_ctx = 1024, .max_tree = 16});
    ar[k] = plain.Generate(reqs[k], DecodeOptions{.learn = false});
  }
  const float epsilon = GroupEpsilon(*target, reqs);
  struct Machine {
    std::string name;
    std::function<double(int32_t)> verify_ms, draft_ms;
  };
  const std::vector<Machine> machines = {
      {"gpu", [](int32_t) { return 10.0; }, [](int32_t) { return 1.0; }},
      {"block", [](int32_t r) { return r <= 4 ? 10.0 : 10.0 * (r - 3); }, [](int32_t) { return 2.0; }}};
  for (const Machine& m : machines) {
    EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
    cfg.profile_dir = (dir.path / m.name).string();
    WriteProfile(*target, draft.get(), cfg, m.verify_ms, m.draft_ms);
    EngineGroup group(*target, draft.get(), cfg, {.slots = static_cast<int32_t>(n)});
    for (size_t k = 0; k < n; ++k) {
      group.Start(static_cast<int32_t>(k), reqs[k], DecodeOptions{.method = Method::kGraft, .tree_budget = 16});
    }
    std::vector<GenerateResult> got(n);
    for (int steps = 0; !group.idle(); ++steps) {
      ASSERT_LT(steps, 500);
      for (EngineGroup::Finished& f : group.Step()) {
        EXPECT_EQ(f.error, "") << m.name << " request " << f.slot;
        got[f.slot] = std::move(f.result);
      }
    }
    int64_t took_part = 0, declined = 0, draft_steps = 0;
    int parted = 0;
    float max_gap = 0;
    for (size_t k = 0; k < n; ++k) {
      const GenerationStats& st = got[k].stats;
      EXPECT_EQ(st.t_calibrate_ms, 0.0) << "the made-up profile was not used";
      parted += !SameOrNearTie(*target, reqs[k].prompt, ar[k].tokens, got[k].tokens, epsilon,
                               m.name + " request " + std::to_string(k), &max_gap);
      took_part += st.n_draft_passes;
      declined += st.n_draft_declined;
      draft_steps += st.n_draft_steps;
    }
    EXPECT_LE(parted, 1) << m.name << ": largest top-2 gap where a stream parted: " << max_gap;
    printf("[group offers] %s: %lld drafted steps, %lld offers declined, %lld shared draft passes for %lld taken part in\n",
           m.name.c_str(), static_cast<long long>(draft_steps), static_cast<long long>(declined),
           static_cast<long long>(group.draft_passes()), static_cast<long long>(took_part));
    if (m.name == "gpu") {
      EXPECT_GT(draft_steps, 0);
      EXPECT_LT(group.draft_passes() * 2, took_part) << "the requests did not draft together";
    } else {
      EXPECT_GT(declined, 0);
      // Rows past 4 cost a pass each, so a draft pays at most 3 levels deep there; the
      // draft never runs deeper than the depth its gate priced (one pass per level).
      EXPECT_LE(took_part, 3 * draft_steps);
    }
  }
}

// A request alone on a group's slot shares its first pass with its prompt's last
// chunk, and its first tree is sized against those rows. That step must not teach
// graft's draft gate that retrieval is slow (its tree's stand-alone cost), or the
// gate drafts for the rest of the engine's life where drafting cannot pay. Here a
// target row costs half a pass more and a draft pass 0.6 of one: even a draft that is
// always right (the tiny target as its own draft) loses, so graft never drafts, alone
// or in a group.
TEST(EngineGroupTest, AFirstStepBesideItsPromptDoesNotTurnTheDraftOn) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  auto draft = Model::Load(ModelPath("tiny-target.gguf"));
  const TempDir dir("graft_group_gate");
  EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
  cfg.profile_dir = dir.path.string();
  WriteProfile(*target, draft.get(), cfg, [](int32_t r) { return 50.0 * (r + 1); }, [](int32_t) { return 60.0; });
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  ASSERT_GE(texts.size(), 3u);
  Engine alone(*target, draft.get(), cfg);
  EngineGroup group(*target, draft.get(), cfg, {.slots = 1});
  for (size_t k = 0; k < 3; ++k) {
    GenerateRequest req;
    req.prompt = Encode(*target, texts[k]);
    if (req.prompt.size() > 120) req.prompt.resize(120);
    req.n_predict = 40;
    const DecodeOptions o{.method = Method::kGraft, .tree_budget = 16};
    EXPECT_EQ(alone.Generate(req, o).stats.n_draft_steps, 0) << "alone, request " << k;
    group.Start(0, req, o);
    GenerateResult got;
    for (int steps = 0; !group.idle(); ++steps) {
      ASSERT_LT(steps, 500);
      for (EngineGroup::Finished& f : group.Step()) got = std::move(f.result);
    }
    EXPECT_EQ(got.stats.n_draft_steps, 0) << "in a group, request " << k;
    EXPECT_EQ(got.stats.t_calibrate_ms, 0.0);
  }
}

// The same on the default pair (Q4_K), 8 requests on 4 slots, ar and graft: every
// stream equals its single-engine ar output or parts from it at a near-tie only.
TEST(EngineGroupTest, StreamsEqualSingleOutputsDefaultPair) {
  const char* env = std::getenv("GRAFT_TEST_REAL_PAIR");
  if (env != nullptr && std::string(env) == "0") GTEST_SKIP() << "GRAFT_TEST_REAL_PAIR=0";
  auto target = Model::Load(ModelPath("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"));
  auto draft = Model::Load(ModelPath("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
  const EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
  const std::vector<std::string> texts = SpecBenchPrompts(2);
  const size_t n = 8;
  ASSERT_GE(texts.size(), n);
  Engine alone(*target, nullptr, cfg);
  std::vector<GenerateRequest> reqs(n);
  std::vector<std::vector<Token>> ref(n);
  for (size_t k = 0; k < n; ++k) {
    reqs[k].prompt = Encode(*target, texts[k]);
    if (reqs[k].prompt.size() > 200) reqs[k].prompt.resize(200);
    reqs[k].n_predict = 24;
    ref[k] = alone.Generate(reqs[k], DecodeOptions{.learn = false}).tokens;
  }
  const float epsilon = GroupEpsilon(*target, reqs);
  EngineGroup group(*target, draft.get(), cfg, {.slots = 4});
  const std::vector<GenerateResult> results = RunThroughGroup(
      group, reqs, [](size_t k) { return DecodeOptions{.method = k % 2 ? Method::kGraft : Method::kAr}; }, 2000);
  std::vector<std::vector<Token>> got(n);
  for (size_t k = 0; k < n; ++k) got[k] = results[k].tokens;
  int diverged = 0;
  float max_gap = 0;
  for (size_t k = 0; k < n; ++k) {
    diverged += !SameOrNearTie(*target, reqs[k].prompt, ref[k], got[k], epsilon,
                               "request " + std::to_string(k) + (k % 2 ? " (graft)" : " (ar)"), &max_gap);
  }
  printf("[group] default pair: %d of %zu streams parted from their single-engine output at near-ties "
         "(largest top-2 gap %.3f, allowed %.3f)\n", diverged, n, max_gap, epsilon);
}

// Prefill ageing: a long prompt on one slot, and on the other a stream of short prompts,
// each of which fits one step's chunk budget but for a token and ends with its first
// token. Shortest-first alone leaves the long prompt one token per step (about 200
// steps to its first token); with ageing it ranks first after some 60 steps.
TEST(EngineGroupTest, ShortPromptsDoNotStarveALongOne) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  const EngineConfig cfg{.n_ctx = 512, .max_tree = 16};
  constexpr int32_t kChunk = 16;
  EngineGroup group(*target, nullptr, cfg, {.slots = 2, .prefill_chunk = kChunk});
  std::vector<Token> text;
  for (const std::string& t : SpecBenchPrompts(1)) {
    const std::vector<Token> e = Encode(*target, t);
    text.insert(text.end(), e.begin(), e.end());
  }
  ASSERT_GE(text.size(), 400u);
  GenerateRequest long_req;
  long_req.prompt.assign(text.begin(), text.begin() + 200);
  long_req.n_predict = 1;
  int32_t first_token_step = -1, step = 0, shorts = 0;
  long_req.on_tokens = [&](const std::vector<Token>&) {
    first_token_step = step;
    return true;
  };
  group.Start(0, long_req, {});
  for (; first_token_step < 0; ++step) {
    ASSERT_LT(step, 400);
    if (!group.busy(1)) {
      GenerateRequest short_req;
      const size_t at = 200 + (shorts++ % 10) * kChunk;
      short_req.prompt.assign(text.begin() + at, text.begin() + at + kChunk);  // kChunk - 1 to prefill
      short_req.n_predict = 1;
      group.Start(1, short_req, {});
    }
    for (const EngineGroup::Finished& f : group.Step()) EXPECT_EQ(f.error, "") << "slot " << f.slot;
  }
  printf("[group] a 200-token prompt beside %d short ones: first token at step %d\n", shorts, first_token_step);
  EXPECT_GT(shorts, 20) << "the short prompts did not compete";
  EXPECT_LT(first_token_step, 100);
}

TEST(EngineGroupTest, BadRequestsLeaveTheSlotFree) {
  auto target = Model::Load(ModelPath("tiny-target.gguf"));
  const EngineConfig cfg{.n_ctx = 128, .max_tree = 16};
  EngineGroup group(*target, nullptr, cfg, {.slots = 2});
  GenerateRequest req;
  const auto expect_error = [&](const DecodeOptions& o, const std::string& needle) {
    try {
      group.Start(0, req, o);
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(group.busy(0));
  };
  expect_error(DecodeOptions{}, "empty");
  req.prompt.assign(200, 300);
  expect_error(DecodeOptions{}, "context");
  req.prompt.assign(100, 300);
  expect_error(DecodeOptions{.method = Method::kGraft}, "draft model");
  expect_error(DecodeOptions{.tree_budget = 17}, "exceeds");
  // A request that fills its lane stops with "context"; the other lane is unaffected.
  req.n_predict = 200;
  group.Start(0, req, DecodeOptions{.method = Method::kSuffix});
  GenerateRequest small;
  small.prompt = target->Tokenize("hello there", true, false);
  small.n_predict = 8;
  group.Start(1, small, DecodeOptions{});
  std::map<int32_t, EngineGroup::Finished> done;
  for (int i = 0; i < 500 && !group.idle(); ++i) {
    for (auto& f : group.Step()) done.emplace(f.slot, std::move(f));
  }
  ASSERT_EQ(done.size(), 2u);
  // (llama.cpp rounds a context up, a lane's share may be smaller than a lone one's)
  Engine alone(*target, nullptr, cfg);
  const GenerateResult full = alone.Generate(req, DecodeOptions{.method = Method::kSuffix});
  const std::vector<Token>& lane0 = done.at(0).result.tokens;
  EXPECT_EQ(done.at(0).result.stats.stop_reason, "context");
  EXPECT_GE(lane0.size(), 128u - 100u);
  ASSERT_LE(lane0.size(), full.tokens.size());
  EXPECT_TRUE(std::equal(lane0.begin(), lane0.end(), full.tokens.begin()));
  EXPECT_EQ(done.at(1).result.tokens.size(), 8u);
  EXPECT_EQ(done.at(1).result.tokens, alone.Generate(small, DecodeOptions{}).tokens);
  EXPECT_THROW(EngineGroup(*target, nullptr, cfg, {.slots = 0}), Error);
  EXPECT_THROW(EngineGroup(*target, nullptr, EngineConfig{.n_ctx = 128, .max_tree = 64}, {.slots = 5}), Error);
}

// Trials of every kept source in the learned-state file at `path`.
std::map<std::string, double> SavedTrials(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::string, double> out;
  for (const auto& [name, v] : j.at("calibration").items()) {
    double n = 0;
    for (double t : v.at("trials").get<std::vector<double>>()) n += t;
    out[name] = n;
  }
  return out;
}

// The tiny target as its own draft, on a made-up CPU-like machine (a second row costs
// a fifth of a pass more, a draft pass more than a target one) whose profile lies in a
// folder of its own.
struct CpuLikeTinyPair {
  explicit CpuLikeTinyPair(const std::string& name) : dir(name) {
    cfg.profile_dir = dir.path.string();
    WriteProfile(*target, draft.get(), cfg, [](int32_t r) { return 50.0 + 10.0 * (r - 1); },
                 [](int32_t) { return 60.0; });
  }
  // A chat request for `text`, its prompt cut to 120 tokens.
  GenerateRequest Request(const std::string& text, int32_t n_predict) const {
    GenerateRequest req;
    req.prompt = Encode(*target, text);
    if (req.prompt.size() > 120) req.prompt.resize(120);
    req.n_predict = n_predict;
    return req;
  }
  std::unique_ptr<Model> target = Model::Load(ModelPath("tiny-target.gguf"));
  std::unique_ptr<Model> draft = Model::Load(ModelPath("tiny-target.gguf"));
  TempDir dir;
  EngineConfig cfg{.n_ctx = 1024, .max_tree = 16};
};

// A graft request never falls further behind plain decoding than its loss budget
// (DecodeOptions::max_loss, LossBudget): on a machine where each extra row costs 0.2
// of a pass and a draft pass 20 (so the draft never runs), a cold engine's modelled
// time (its passes priced by the profile) stays within (1 + max_loss) x plain +
// loss_grant passes + loss_prefill x its prompt's modelled prefill (+ loss_sure_cap
// passes, which one sure bet may overdraw) on every request,
// whatever its optimistic first estimates promised. A tight budget (no allowance, half
// a pass) makes the check bite: without it, graft goes past that bound.
TEST(EngineTest, GraftStaysWithinItsLossBudget) {
  CpuLikeTinyPair pair("graft_loss_budget");
  const auto verify_ms = [](int32_t r) { return 50.0 + 10.0 * (r - 1); };
  WriteProfile(*pair.target, pair.draft.get(), pair.cfg, verify_ms, [](int32_t) { return 1000.0; });
  const std::vector<std::string> texts = SpecBenchPrompts(2);
  ASSERT_GE(texts.size(), 8u);
  // The worst request's modelled ms beyond the bound (<= 0: within it), and the rows verified.
  const auto worst = [&](double max_loss, double sure_cap, int64_t* rows) {
    Engine engine(*pair.target, pair.draft.get(), pair.cfg);
    const DecodeOptions o{.method = Method::kGraft,
                          .tree_budget = 16,
                          .max_loss = max_loss,
                          .loss_grant = 0.5,
                          .loss_prefill = 0.01,
                          .loss_sure_cap = sure_cap};
    const int32_t last = CostProfileOptionsOf(pair.cfg).max_rows;  // CostModel::PrefillMs: at its per-row cost
    double over = -1e300;
    for (size_t k = 0; k < 8; ++k) {
      const GenerateRequest req = pair.Request(texts[k], 48);
      const GenerateResult r = engine.Generate(req, o);
      EXPECT_EQ(r.stats.n_draft_steps, 0);  // drafted trees are DraftGate's to size, not the budget's
      double ms = 0;
      for (size_t n = 1; n < r.stats.pass_rows.size(); ++n) ms += r.stats.pass_rows[n] * verify_ms(static_cast<int32_t>(n));
      const double prefill_ms = static_cast<double>(req.prompt.size()) * verify_ms(last) / last;
      const double bound = (1 + std::max(0.0, max_loss)) * r.stats.n_generated * verify_ms(1) +
                           (o.loss_grant + o.loss_sure_cap) * verify_ms(1) + o.loss_prefill * prefill_ms;
      over = std::max(over, ms - bound);
      *rows += r.stats.nodes_verified;
    }
    return over;
  };
  int64_t rows_bounded = 0, rows_sure = 0, rows_free = 0;
  const double bounded = worst(0.0, 0.0, &rows_bounded);
  const double sure = worst(0.0, 2.0, &rows_sure);  // the bound then holds the cap's 2 passes
  const double free = worst(-1, 0.0, &rows_free);
  printf("[loss budget] worst request past its bound: %.1f ms bounded (%lld rows), %.1f ms with sure bets "
         "(%lld rows), %.1f ms without (%lld rows)\n",
         bounded, static_cast<long long>(rows_bounded), sure, static_cast<long long>(rows_sure), free,
         static_cast<long long>(rows_free));
  EXPECT_LE(bounded, 1e-6);
  EXPECT_LE(sure, 1e-6);
  EXPECT_GT(free, 0.0) << "this scenario no longer makes graft bet past the bound: the check above tests nothing";
}

// graft prices each step's pass at its request's length (ContextCost). A made-up
// machine where rows are nearly free at the profile's 256-token prefix, but every
// cached token adds 0.5 ms to each row: at 600 tokens an extra row costs three
// passes of the short context. The same long request verifies bigger trees when the
// profile knows nothing of the context (no long curve; 1.31 rows a pass here) than
// when it does (at most 1.1); the pass contexts are summed for re-pricing.
TEST(EngineTest, GraftPricesEachStepAtItsRequestsLength) {
  CpuLikeTinyPair pair("graft_context_cost");
  std::string text;
  for (const std::string& t : SpecBenchPrompts(3)) text += t + "\n";
  GenerateRequest req;
  req.prompt = Encode(*pair.target, text);
  ASSERT_GE(req.prompt.size(), 600u);
  req.prompt.resize(600);
  req.n_predict = 48;
  const auto verify_ms = [](int32_t r) { return 50.0 + 1.0 * (r - 1); };
  const auto draft_ms = [](int32_t) { return 1000.0; };
  const DecodeOptions o{.method = Method::kGraft, .tree_budget = 16, .max_loss = -1};
  const auto rows_per_pass = [&](bool long_curve, GenerationStats* st) {
    if (long_curve) {
      const int32_t extra = CostProfileOptions{}.long_prefix - CostProfileOptions{}.prefix;
      WriteProfile(*pair.target, pair.draft.get(), pair.cfg, verify_ms, draft_ms,
                   [&](int32_t r) { return verify_ms(r) + extra * 0.5 * r; });
    } else {
      WriteProfile(*pair.target, pair.draft.get(), pair.cfg, verify_ms, draft_ms);
    }
    Engine engine(*pair.target, pair.draft.get(), pair.cfg);
    const GenerateResult r = engine.Generate(req, o);
    EXPECT_EQ(r.stats.n_draft_steps, 0);
    *st = r.stats;
    return static_cast<double>(r.stats.nodes_verified) / r.stats.n_passes;
  };
  GenerationStats flat, priced;
  const double flat_rows = rows_per_pass(false, &flat);
  const double priced_rows = rows_per_pass(true, &priced);
  printf("[context cost] rows per pass at 600 tokens: %.2f unpriced, %.2f priced\n", flat_rows, priced_rows);
  EXPECT_LE(priced_rows, 1.1);
  EXPECT_GT(flat_rows, priced_rows + 0.2) << "the scenario no longer grows trees: the check above tests nothing";
  // Every pass ran with 600 to 600 + 48 tokens in its request.
  EXPECT_GE(priced.pass_context, 600.0 * priced.n_passes);
  EXPECT_LE(priced.pass_context, 648.0 * priced.n_passes);
  EXPECT_GE(flat.pass_row_context, 600.0 * flat.nodes_verified);
  EXPECT_LE(flat.pass_row_context, 648.0 * flat.nodes_verified);
}

// What an engine saves is what the next one starts from, weighed as a prior of at
// most kLearnedPriorTrials per source; a group counts the prior its slots share once.
TEST(LearnedStateTest, SavedStateIsTheNextEnginesCappedPrior) {
  CpuLikeTinyPair pair("graft_learned_engine");
  const Model* target = pair.target.get();
  const Model* draft = pair.draft.get();
  EngineConfig& cfg = pair.cfg;
  cfg.learned_state = LearnedStatePath(LearnedStateKey(*target, draft), cfg.profile_dir);
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  ASSERT_GE(texts.size(), 4u);
  auto request = [&](size_t k) { return pair.Request(texts[k], 48); };
  const DecodeOptions graft{.method = Method::kGraft, .tree_budget = 16};
  {
    Engine cold(*target, draft, cfg);
    for (size_t k = 0; k < 4; ++k) cold.Generate(request(k), graft);
    ASSERT_TRUE(cold.SaveLearned());
  }
  ASSERT_GT(SavedTrials(cfg.learned_state).count("suffix"), 0u) << "the requests tested no suffix node";
  // A state of many runs: more trials than a prior may weigh.
  Calibration many;
  for (int i = 0; i < 500; ++i) many.Record(Source::kRequest, 0.05f + (i % 10) * 0.1f, 1 + i % 4, i % 3 == 0);
  for (int i = 0; i < 200; ++i) many.Record(Source::kRecycle, 0.6f, 1, i % 7 == 0);
  for (int i = 0; i < 20; ++i) many.Record(Source::kPld, 0.9f, 2, true);
  SaveLearnedState(cfg.learned_state, {LearnedStateKey(*target, draft), many.Counts(), ""});
  const std::map<std::string, double> learnt = SavedTrials(cfg.learned_state);
  const std::optional<LearnedState> first = LoadLearnedState(cfg.learned_state, LearnedStateKey(*target, draft));
  ASSERT_TRUE(first.has_value());
  {
    // Made and saved at once: the capped prior, same rates.
    Engine warm(*target, draft, cfg);
    ASSERT_TRUE(warm.SaveLearned());
    for (const auto& [name, n] : SavedTrials(cfg.learned_state)) {
      EXPECT_NEAR(n, std::min(kLearnedPriorTrials, learnt.at(name)), 1e-6) << name;
    }
    const std::optional<LearnedState> capped = LoadLearnedState(cfg.learned_state, first->key);
    ASSERT_TRUE(capped.has_value());
    for (size_t i = 0; i < first->calibration.trials.size(); ++i) {
      if (first->calibration.trials[i] == 0) continue;
      EXPECT_NEAR(capped->calibration.accepts[i] / capped->calibration.trials[i],
                  first->calibration.accepts[i] / first->calibration.trials[i], 1e-9);
    }
  }
  const std::map<std::string, double> prior = SavedTrials(cfg.learned_state);
  {
    EngineGroup group(*target, draft, cfg, {.slots = 3});
    ASSERT_TRUE(group.SaveLearned());
    EXPECT_EQ(SavedTrials(cfg.learned_state), prior) << "three slots counted their shared prior three times";
    group.Start(1, request(0), graft);
    while (!group.idle()) group.Step();
    ASSERT_TRUE(group.SaveLearned());
    const std::map<std::string, double> after = SavedTrials(cfg.learned_state);
    EXPECT_GT(after.at("suffix"), prior.at("suffix"));
    for (const auto& [name, n] : after) EXPECT_LE(n, kLearnedKeepTrials + 1e-6) << name;
  }
  // No file configured: nothing to save. An unusable file: a cold start, then a good file.
  EngineConfig none = cfg;
  none.learned_state.clear();
  EXPECT_FALSE(Engine(*target, draft, none).SaveLearned());
  std::ofstream(cfg.learned_state) << "{\"version\": 1, \"key\": 7";
  Engine fresh(*target, draft, cfg);
  ASSERT_TRUE(fresh.SaveLearned());
  EXPECT_TRUE(LoadLearnedState(cfg.learned_state, first->key).has_value());
}

// graft learns from the candidates it cut as well as from those it verified
// (graft/shadow.h): after requests on a machine where a second row costs 0.8 of a pass
// (it cuts most of what it retrieves), its calibration holds more suffix trials than
// it verified suffix nodes.
TEST(LearnedStateTest, GraftLearnsFromTheCandidatesItCut) {
  CpuLikeTinyPair pair("graft_learned_shadow");
  WriteProfile(*pair.target, pair.draft.get(), pair.cfg, [](int32_t r) { return 50.0 + 40.0 * (r - 1); },
               [](int32_t) { return 60.0; });
  pair.cfg.learned_state = (pair.dir.path / "learned.json").string();
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  ASSERT_GE(texts.size(), 4u);
  const DecodeOptions graft{.method = Method::kGraft, .tree_budget = 16};
  Engine engine(*pair.target, pair.draft.get(), pair.cfg);
  int64_t verified = 0;
  for (size_t k = 0; k < 4; ++k) {
    const GenerateResult r = engine.Generate(pair.Request(texts[k], 64), graft);
    verified += r.stats.per_source[static_cast<int>(Source::kRequest)].proposed;
  }
  ASSERT_TRUE(engine.SaveLearned());
  const std::map<std::string, double> trials = SavedTrials(pair.cfg.learned_state);
  ASSERT_GT(trials.count("suffix"), 0u);
  printf("[shadow] suffix nodes verified %lld, suffix trials learnt %.0f\n", static_cast<long long>(verified),
         trials.at("suffix"));
  // Only tested nodes are trials: without the cut ones there would be at most as many.
  EXPECT_GT(trials.at("suffix"), static_cast<double>(verified));
}

// The state decides the trees: with a state that has seen every source fail, graft
// does not try them on a CPU-like machine (a second row costs a fifth of a pass more),
// where a cold engine does; the tokens are the same either way.
TEST(LearnedStateTest, AStateWhereEverySourceFailedKeepsGraftFromTryingThem) {
  CpuLikeTinyPair pair("graft_learned_hopeless");
  const Model* target = pair.target.get();
  const Model* draft = pair.draft.get();
  const EngineConfig& cfg = pair.cfg;
  const TempDir& dir = pair.dir;
  const std::vector<std::string> texts = SpecBenchPrompts(1);
  ASSERT_GE(texts.size(), 4u);
  const DecodeOptions graft{.method = Method::kGraft, .tree_budget = 16};
  Calibration hopeless;
  for (Source s : {Source::kDraft, Source::kRequest, Source::kCorpus, Source::kRecycle, Source::kPld}) {
    for (int c = 0; c < Calibration::kConfBuckets; ++c) {
      for (int d = 1; d <= Calibration::kDepthBuckets; ++d) {
        for (int i = 0; i < 4; ++i) hopeless.Record(s, (c + 0.5f) / Calibration::kConfBuckets, d, false);
      }
    }
  }
  const std::string path = (dir.path / "hopeless.json").string();
  SaveLearnedState(path, {LearnedStateKey(*target, draft), hopeless.Counts(), ""});
  int64_t cold_grafted = 0, warm_grafted = 0;
  for (size_t k = 0; k < 4; ++k) {
    const GenerateRequest req = pair.Request(texts[k], 64);
    Engine cold(*target, draft, cfg);
    EngineConfig warm_cfg = cfg;
    warm_cfg.learned_state = path;
    Engine warm(*target, draft, warm_cfg);
    const GenerateResult a = cold.Generate(req, graft);
    const GenerateResult b = warm.Generate(req, graft);
    cold_grafted += a.stats.n_grafted;
    warm_grafted += b.stats.n_grafted;
    if (a.tokens != b.tokens) {  // only at a near-tie, where trees of other sizes round differently
      const float epsilon = std::max(1e-3f, 2 * BatchedVsSingleDiff(*target, req.prompt));
      float gap = 0;
      SameOrNearTie(*target, req.prompt, a.tokens, b.tokens, epsilon, "request " + std::to_string(k), &gap);
    }
  }
  // Every slot of a group starts from the state (it is read once, by slot 0).
  EngineConfig group_cfg = cfg;
  group_cfg.learned_state = path;
  EngineGroup group(*target, draft, group_cfg, {.slots = 2});
  int64_t group_grafted = 0;
  for (size_t k = 0; k < 4; ++k) {
    group.Start(1, pair.Request(texts[k], 64), graft);
    while (!group.idle()) {
      for (const EngineGroup::Finished& f : group.Step()) group_grafted += f.result.stats.n_grafted;
    }
  }
  printf("[learned state] grafted nodes: cold %lld, after a hopeless state %lld, its group's slot 1 %lld\n",
         static_cast<long long>(cold_grafted), static_cast<long long>(warm_grafted),
         static_cast<long long>(group_grafted));
  ASSERT_GT(cold_grafted, 4) << "the cold engine tried too little for the test to tell";
  EXPECT_LT(warm_grafted * 4, cold_grafted);
  EXPECT_LT(group_grafted * 4, cold_grafted);
}

}  // namespace
}  // namespace graft
