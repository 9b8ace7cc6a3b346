// The harness end to end on the tiny random-weight pair: every configuration runs,
// files are written, summary keys exist, and the numbers hold their identities per row
// (tau, node counts, per-source sums, ar's speedup 1, lossless flags = token equality
// with a greedy reference computed by the test itself).
// Also: an interrupted run (stop flag, between prompts and mid-generation) keeps exactly
// the finished prompts; long prompts are cut or skipped.
// Threads = 1: on a shared 2-core machine a 2-thread decode can stall behind other jobs.
#include "bench/harness.h"

#include <gtest/gtest.h>

#include "common/test_models.h"
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "bench/peers.h"
#include "bench/report.h"
#include "engine/cost_model.h"
#include "graft/cost_profile.h"
#include "graft/error.h"

namespace graft::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using graft::testing::ModelPath;

std::vector<BenchPrompt> Prompts() {
  return {
      {"1", "chat", {"Tell me about the ocean and its many wonders.", "Now say that again, shorter."}},
      {"2", "code", {"def add(a, b):\n    return a + b\n\nRename the function add to plus."}},
      {"3", "code", {"Write a function that returns the square of a number."}},
      {"4", "chat", {"What is the capital of France?"}},
  };
}

class HarnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = Model::Load(ModelPath("tiny-target.gguf")).release();
    draft_ = Model::Load(ModelPath("tiny-draft.gguf")).release();
  }
  static void TearDownTestSuite() {
    delete draft_;
    delete target_;
  }
  void SetUp() override {
    out_ = fs::temp_directory_path() / ("graft_harness_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(out_);
  }
  void TearDown() override { fs::remove_all(out_); }

  static HarnessOptions Options() {
    HarnessOptions o;
    o.methods = {Method::kChain, Method::kTree, Method::kPruned, Method::kPld,
                 Method::kSuffix, Method::kRecycle, Method::kGraft};
    o.budgets = {4, 8};
    o.n_predict = 12;
    o.n_threads = 1;
    o.n_ctx = 1024;
    o.oracle = true;
    return o;
  }

  // Greedy tokens of a one-turn prompt from a fresh ar Engine, encoded as the harness
  // documents it (chat template, no system message), -n 12: the baseline for lossless.
  static std::vector<Token> GreedyReference(const BenchPrompt& p) {
    EngineConfig ec;
    ec.n_ctx = 256;  // what the harness sizes for these short prompts
    ec.n_threads = 1;
    ec.max_tree = 1;
    Engine engine(*target_, nullptr, ec);
    GenerateRequest req;
    req.prompt = target_->Tokenize(target_->ApplyChatTemplate({{"user", p.turns.at(0)}}, true), true, true);
    req.n_predict = 12;
    DecodeOptions d;
    d.method = Method::kAr;
    d.tree_budget = 1;
    return engine.Generate(req, d).tokens;
  }

  static json ReadJson(const fs::path& p) {
    std::ifstream in(p);
    EXPECT_TRUE(in.good()) << p;
    return json::parse(in);  // throws on a partial file
  }

  static Model* target_;
  static Model* draft_;
  fs::path out_;
};
Model* HarnessTest::target_ = nullptr;
Model* HarnessTest::draft_ = nullptr;

TEST_F(HarnessTest, EndToEndFilesSummaryAndIdentities) {
  HarnessOptions opts = Options();
  opts.keep_outputs = true;  // --save-outputs: texts and tokens in results.json
  Harness h(*target_, draft_, opts);
  ASSERT_EQ(h.configs().size(), 1u + 7 * 2 + 2);  // ar, 7 methods x 2 budgets, oracle x 2
  EXPECT_EQ(h.configs()[0].Name(), "ar");
  const auto prompts = Prompts();
  const std::vector<std::string> cats = CategoryOrder(prompts);
  int callbacks = 0;
  int64_t progress_done = 0;
  HarnessCallbacks cb;
  cb.on_prompt = [&](const std::vector<BenchRow>& rows, const RunStatus& st) {
    ++callbacks;
    EXPECT_EQ(rows.size(), static_cast<size_t>(st.prompts_done) * h.configs().size());
    WriteResults(out_.string(), {json{{"date", "test"}}, &h.configs(), &cats, &rows, &st});
  };
  cb.on_progress = [&](const ProgressEvent& e) {
    if (!e.warmup) progress_done = e.done;
  };
  const RunStatus st = h.Run(prompts, cb, nullptr);
  EXPECT_FALSE(st.interrupted);
  EXPECT_EQ(st.prompts_done, 4);
  EXPECT_EQ(callbacks, 4);
  EXPECT_EQ(progress_done, static_cast<int64_t>(4 * h.configs().size()));
  ASSERT_EQ(h.rows().size(), 4 * h.configs().size());
  // The profile the harness priced passes with (cached by the run).
  CostProfileOptions po;
  po.n_threads = opts.n_threads;
  po.max_rows = 8;
  double measured_ms = -1;
  CostProfile profile = LoadOrMeasureCostProfile(*target_, draft_, po, &measured_ms);
  EXPECT_EQ(measured_ms, 0.0) << "the harness did not cache the profile it priced passes with";
  const CostModel costs = CostModel::Of(profile);

  for (const BenchRow& r : h.rows()) {
    SCOPED_TRACE(r.prompt_id + " " + r.config.Name());
    const GenerationStats& s = r.stats;
    EXPECT_EQ(r.turns, r.prompt_id == "1" ? 2 : 1);
    ASSERT_GT(s.n_passes, 0);
    EXPECT_DOUBLE_EQ(s.tau(), static_cast<double>(s.n_generated) / s.n_passes);
    // Each pass emits its accepted proposals plus one target token; the last pass of a
    // turn may be cut by -n or end at end-of-generation.
    EXPECT_LE(s.n_generated, s.n_accepted + s.n_passes);
    EXPECT_GE(s.n_generated + r.turns, s.n_passes);  // every pass but a turn's last emits >= 1 token
    EXPECT_EQ(s.nodes_verified, s.n_passes + s.n_drafted + s.n_grafted);
    int64_t proposed = 0, accepted = 0;
    for (int i = 1; i < kNumSources; ++i) {
      proposed += s.per_source[i].proposed;
      accepted += s.per_source[i].accepted;
      EXPECT_LE(s.per_source[i].accepted, s.per_source[i].proposed);
    }
    EXPECT_EQ(proposed, s.n_drafted + s.n_grafted);
    EXPECT_EQ(accepted, s.n_accepted);
    EXPECT_LE(s.nodes_verified, static_cast<int64_t>(s.n_passes) * std::max(r.config.budget, 1));
    EXPECT_EQ(s.n_generated, static_cast<int32_t>(r.outputs[0].size() + (r.turns > 1 ? r.outputs[1].size() : 0)));
    EXPECT_LE(s.n_generated, 12 * r.turns);
    EXPECT_GT(r.wall_ms, 0);
    ASSERT_TRUE(r.lossless.has_value());  // temperature 0
    if (r.config.method == Method::kAr) {
      EXPECT_EQ(s.n_drafted + s.n_grafted + s.n_accepted, 0);
      EXPECT_EQ(*r.speedup, 1.0);
      EXPECT_TRUE(*r.lossless);
      EXPECT_EQ(r.first_divergence, -1);
    } else {
      ASSERT_TRUE(r.speedup.has_value());
      EXPECT_GT(*r.speedup, 0);
      EXPECT_TRUE(r.oracle_fraction.has_value());
    }
    if (r.config.method == Method::kOracle) {
      // Fed ar's own output: every proposal is accepted (up to the budget per pass).
      EXPECT_EQ(s.n_accepted, s.n_grafted);
      EXPECT_EQ(s.per_source[static_cast<int>(Source::kOracle)].proposed, s.n_grafted);
      EXPECT_GT(s.tau(), 1.5);
      EXPECT_DOUBLE_EQ(*r.oracle_fraction, 1.0);
    }
    if (!MethodNeedsDraft(r.config.method)) {
      EXPECT_EQ(s.n_drafted, 0);
    }
    // Passes by rows: they add up to the passes, and the target's to the nodes verified.
    int64_t passes = 0, rows = 0, draft_passes = 0;
    for (size_t n = 0; n < s.pass_rows.size(); ++n) {
      passes += s.pass_rows[n];
      rows += static_cast<int64_t>(n) * s.pass_rows[n];
    }
    for (int32_t k : s.draft_pass_rows) draft_passes += k;
    EXPECT_EQ(passes, s.n_passes);
    EXPECT_EQ(rows, s.nodes_verified);
    EXPECT_EQ(draft_passes, s.n_draft_passes);
    if (MethodNeedsDraft(r.config.method) && r.config.method != Method::kGraft) {
      EXPECT_GT(draft_passes, 0);
    }
    // The modelled speedup: this row's and ar's passes priced by the cached profile.
    const BenchRow* ar = nullptr;
    for (const BenchRow& x : h.rows()) {
      if (x.prompt_id == r.prompt_id && x.config.method == Method::kAr) ar = &x;
    }
    ASSERT_NE(ar, nullptr);
    ASSERT_TRUE(r.modelled_speedup.has_value());
    const double want = (s.n_generated / ModelledMs(s, costs)) / (ar->stats.n_generated / ModelledMs(ar->stats, costs));
    EXPECT_NEAR(*r.modelled_speedup, want, 1e-12);
    if (r.config.method == Method::kAr) {
      EXPECT_EQ(*r.modelled_speedup, 1.0);
    }
  }
  // lossless and first_divergence against a fact the harness does not compute: each
  // single-turn prompt's greedy output from a plain ar Engine run here, compared token
  // by token (a conversation's second turn depends on the first answer's text, so
  // prompt "1" is left out).
  const std::vector<std::vector<Token>> reference = {{}, GreedyReference(prompts[1]), GreedyReference(prompts[2]),
                                                     GreedyReference(prompts[3])};
  int32_t checked = 0;
  for (const BenchRow& r : h.rows()) {
    if (r.turns != 1) continue;
    SCOPED_TRACE(r.prompt_id + " " + r.config.Name());
    const std::vector<Token>& want = reference.at(r.prompt_index);
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(r.outputs.size(), 1u);
    const std::vector<Token>& got = r.outputs[0];
    size_t same = 0;
    while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
    const bool equal = same == got.size() && same == want.size();
    if (r.config.method == Method::kAr) {
      EXPECT_EQ(got, want) << "the harness's ar row is not plain greedy decoding";
    }
    EXPECT_EQ(*r.lossless, equal);
    EXPECT_EQ(r.first_divergence, equal ? -1 : static_cast<int32_t>(same));
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int32_t>(3 * h.configs().size()));

  // Files: complete, parseable, with the documented keys.
  const json j = ReadJson(out_ / "results.json");
  EXPECT_EQ(j["schema"], "graft-bench/1");
  EXPECT_EQ(j["status"]["state"], "complete");
  EXPECT_EQ(j["rows"].size(), h.rows().size());
  const json& sum = j["summary"];
  for (const char* k : {"ar", "chain", "chain@4", "chain@8", "tree", "tree@8", "pruned", "pld", "suffix", "recycle",
                        "graft", "graft@4", "oracle", "oracle@8"}) {
    ASSERT_TRUE(sum.contains(k)) << k;
    for (const char* f : {"speedup", "tau", "lossless_rate", "acceptance", "nodes_per_pass", "ms_per_pass",
                          "categories", "oracle_fraction", "per_source", "e2e_speedup", "tokens_per_s",
                          "modelled_speedup"}) {
      EXPECT_TRUE(sum[k].contains(f)) << k << "." << f;
    }
    EXPECT_TRUE(sum[k]["categories"].contains("chat")) << k;
    EXPECT_TRUE(sum[k]["categories"].contains("code")) << k;
    EXPECT_EQ(sum[k]["n"], 4) << k;
  }
  EXPECT_DOUBLE_EQ(sum["ar"]["speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(sum["ar"]["tau"].get<double>(), 1.0 * sum["ar"]["new_tokens"].get<double>() * 4 /
                                                       sum["ar"]["passes"].get<double>());
  EXPECT_DOUBLE_EQ(sum["ar"]["lossless_rate"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(sum["ar"]["categories"]["chat"]["speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(sum["ar"]["modelled_speedup"].get<double>(), 1.0);
  EXPECT_TRUE(j["steadiness"].is_object());
  EXPECT_GT(j["steadiness"]["of_profile"].get<double>(), 0.0);  // ar's passes against the profile's price
  for (size_t i = 0; i < h.rows().size(); ++i) {
    EXPECT_EQ(j["rows"][i]["pass_rows"].get<std::vector<int32_t>>(), h.rows()[i].stats.pass_rows) << i;
    EXPECT_EQ(j["rows"][i]["pass_context"].get<double>(), h.rows()[i].stats.pass_context) << i;
    EXPECT_NEAR(*h.rows()[i].modelled_ms, ModelledMs(h.rows()[i].stats, costs), 1e-9) << i;
  }
  // "<method>" is its best budget.
  for (const char* m : {"chain", "tree", "graft", "oracle"}) {
    const int b = sum[m]["budget"];
    EXPECT_EQ(sum[m]["config"], std::string(m) + "@" + std::to_string(b));
    EXPECT_EQ(sum[m]["speedup"], sum[std::string(m) + "@" + std::to_string(b)]["speedup"]);
    for (int other : {4, 8}) {
      EXPECT_GE(sum[m]["speedup"].get<double>(), sum[std::string(m) + "@" + std::to_string(other)]["speedup"].get<double>());
    }
  }
  // Summary tau = sum of new tokens / sum of passes over rows.
  int64_t gen = 0, passes = 0;
  for (const json& r : j["rows"]) {
    if (r["config"] == "tree@8") {
      gen += r["new_tokens"].get<int64_t>();
      passes += r["target_passes"].get<int64_t>();
    }
  }
  EXPECT_DOUBLE_EQ(sum["tree@8"]["tau"].get<double>(), static_cast<double>(gen) / passes);
  // --save-outputs: each row's tokens, a prompt the same for every configuration.
  std::map<int32_t, json> prompt_of;
  for (size_t i = 0; i < h.rows().size(); ++i) {
    const json& r = j["rows"][i];
    ASSERT_TRUE(r.contains("output_tokens") && r.contains("prompt_tokens") && r.contains("output")) << i;
    EXPECT_EQ(r["output_tokens"].get<std::vector<std::vector<Token>>>(), h.rows()[i].outputs) << i;
    ASSERT_EQ(r["prompt_tokens"].size(), static_cast<size_t>(h.rows()[i].turns)) << i;
    EXPECT_FALSE(r["prompt_tokens"][0].empty()) << i;
    const auto [it, first] = prompt_of.emplace(h.rows()[i].prompt_index, r["prompt_tokens"]);
    if (!first) {
      EXPECT_EQ(it->second, r["prompt_tokens"]) << i;
    }
  }
  EXPECT_TRUE(j["summary_by_temp"].contains("0"));

  std::ifstream csv(out_ / "results.csv");
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 1 + static_cast<int>(h.rows().size()));
  std::ifstream md(out_ / "results.md");
  std::string md_text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(md_text.find("| Method | chat | code | Overall |"), std::string::npos);
  EXPECT_NE(md_text.find("| ar | 1.00x (1.00) | 1.00x (1.00) | 1.00x (1.00) |"), std::string::npos) << md_text;
  EXPECT_NE(md_text.find("### Modelled speedup (every pass priced by the cost profile), temperature 0"), std::string::npos);
  EXPECT_NE(md_text.find("| ar | 1.00x | 1.00x | 1.00x |"), std::string::npos) << md_text;
}

TEST_F(HarnessTest, StopBetweenPromptsKeepsFinishedOnes) {
  HarnessOptions o = Options();
  o.methods = {Method::kTree, Method::kSuffix};
  o.budgets = {4};
  o.oracle = false;
  Harness h(*target_, draft_, o);
  const auto prompts = Prompts();
  const std::vector<std::string> cats = CategoryOrder(prompts);
  std::atomic<bool> stop{false};
  HarnessCallbacks cb;
  cb.on_prompt = [&](const std::vector<BenchRow>& rows, const RunStatus& st) {
    WriteResults(out_.string(), {json::object(), &h.configs(), &cats, &rows, &st});
    if (st.prompts_done == 2) stop = true;
  };
  const RunStatus st = h.Run(prompts, cb, &stop);
  EXPECT_TRUE(st.interrupted);
  EXPECT_EQ(st.prompts_done, 2);
  EXPECT_EQ(h.rows().size(), 2 * h.configs().size());
  const json j = ReadJson(out_ / "results.json");
  EXPECT_EQ(j["rows"].size(), 2 * h.configs().size());
  EXPECT_EQ(j["status"]["prompts_done"], 2);
  std::set<std::string> ids;
  for (const json& r : j["rows"]) ids.insert(r["prompt_id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"1", "2"}));
  // The caller's final write marks the run interrupted.
  WriteResults(out_.string(), {json::object(), &h.configs(), &cats, &h.rows(), &st});
  EXPECT_EQ(ReadJson(out_ / "results.json")["status"]["state"], "interrupted");
}

TEST_F(HarnessTest, StopMidGenerationDropsThePartialPrompt) {
  HarnessOptions o = Options();
  o.methods = {Method::kTree, Method::kPld};
  o.budgets = {4};
  o.oracle = false;
  o.warmup = false;
  Harness h(*target_, draft_, o);
  std::atomic<bool> stop{false};
  HarnessCallbacks cb;
  // Prompt 2's second configuration (tree@4) is cancelled from inside its token stream.
  cb.on_progress = [&](const ProgressEvent& e) {
    if (e.prompt == 1 && e.config == "ar") stop = true;
  };
  const RunStatus st = h.Run(Prompts(), cb, &stop);
  EXPECT_TRUE(st.interrupted);
  EXPECT_EQ(st.prompts_done, 1);
  ASSERT_EQ(h.rows().size(), h.configs().size());
  for (const BenchRow& r : h.rows()) EXPECT_EQ(r.prompt_id, "1");
}

TEST_F(HarnessTest, LongPromptsAreCutOrSkipped) {
  std::string body;
  for (int i = 0; i < 200; ++i) body += "word" + std::to_string(i) + " ";
  std::vector<BenchPrompt> prompts = {{"long", "x", {body + "\nSummarize the list above."}},
                                      {"short", "x", {"Hello there."}}};
  HarnessOptions o = Options();
  o.methods = {Method::kSuffix};
  o.budgets = {4};
  o.oracle = false;
  o.warmup = false;
  o.max_prompt_tokens = 64;
  {
    Harness h(*target_, draft_, o);
    const RunStatus st = h.Run(prompts, {}, nullptr);
    EXPECT_TRUE(st.skipped.empty());
    ASSERT_EQ(h.rows().size(), 4u);
    for (const BenchRow& r : h.rows()) {
      EXPECT_LE(r.stats.n_prompt, 64);
      EXPECT_EQ(r.truncated, r.prompt_id == "long");
    }
  }
  o.long_prompts = LongPromptPolicy::kSkip;
  Harness h(*target_, draft_, o);
  const RunStatus st = h.Run(prompts, {}, nullptr);
  ASSERT_EQ(st.skipped.size(), 1u);
  EXPECT_EQ(st.skipped[0].prompt_id, "long");
  EXPECT_GT(st.skipped[0].tokens, 64);
  EXPECT_EQ(st.prompts_total, 1);
  EXPECT_FALSE(st.interrupted);
  ASSERT_EQ(h.rows().size(), 2u);
  EXPECT_EQ(h.rows()[0].prompt_id, "short");
  EXPECT_EQ(st.skipped[0].cap, 64);
  // Nothing left to run: an error that says which flag to change.
  try {
    Harness(*target_, draft_, o).Run({prompts[0]}, {}, nullptr);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-prompt-tokens"), std::string::npos) << e.what();
  }
}

// Two records that differ only past the cap are one prompt once cut (the long set's
// reports 7 and 14 at 1024 tokens): the later one is skipped, naming the first, so no
// prompt counts twice; an uncut prompt whose text differs still runs.
TEST_F(HarnessTest, PromptsThatAreTheSameOnceCutRunOnce) {
  std::string head, tail;
  for (int i = 0; i < 100; ++i) head += "word" + std::to_string(i) + " ";
  for (int i = 100; i < 200; ++i) tail += "word" + std::to_string(i) + " ";
  tail += "\nSummarize the list above.";
  // A long prompt is cut in its middle (head and tail kept).
  std::vector<BenchPrompt> prompts = {{"a", "x", {head + "alpha " + tail}},
                                      {"b", "x", {head + "beta " + tail}},
                                      {"c", "y", {"Hello there."}},
                                      {"d", "y", {"Hello there!"}},
                                      {"e", "y", {"Hello there.", "And then?"}}};
  HarnessOptions o = Options();
  o.methods = {Method::kPld};
  o.budgets = {4};
  o.n_predict = 4;
  o.oracle = false;
  o.warmup = false;
  o.max_prompt_tokens = 64;
  Harness h(*target_, draft_, o);
  const RunStatus st = h.Run(prompts, {}, nullptr);
  ASSERT_EQ(st.skipped.size(), 1u);
  EXPECT_EQ(st.skipped[0].prompt_id, "b");
  EXPECT_EQ(st.skipped[0].same_as, "a");
  EXPECT_EQ(st.skipped[0].category, "x");
  EXPECT_LE(st.skipped[0].tokens, 64);
  EXPECT_EQ(st.prompts_total, 4);
  std::vector<std::string> ran;
  for (const BenchRow& r : h.rows()) {
    if (r.config.method == Method::kAr) ran.push_back(r.prompt_id);
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "c", "d", "e"}));
  // In results.json, with its reason; a too-long skip says so too.
  RunStatus both = st;
  both.skipped.push_back({"f", "x", 900, 64, ""});
  const std::vector<std::string> categories = {"x", "y"};
  const json j = ResultsJson({.configs = &h.configs(), .categories = &categories, .rows = &h.rows(), .status = &both});
  ASSERT_EQ(j["status"]["skipped"].size(), 2u);
  EXPECT_EQ(j["status"]["skipped"][0]["reason"], "duplicate");
  EXPECT_EQ(j["status"]["skipped"][0]["same_as"], "a");
  EXPECT_EQ(j["status"]["skipped"][1]["reason"], "too long");
  EXPECT_FALSE(j["status"]["skipped"][1].contains("same_as"));
  const std::string md = MarkdownText(j, categories);
  EXPECT_NE(md.find("1 skipped (too long), 1 skipped (the same as an earlier one once cut)"), std::string::npos) << md;
}

// At T > 0 every method samples each output position with ar's seed and uniform, so its
// text is compared with ar's as at T = 0 (the tiny F32 pair has no near-ties here).
TEST_F(HarnessTest, SampledRunsAreComparedWithAr) {
  HarnessOptions o = Options();
  o.methods = {Method::kPld};
  o.budgets = {4};
  o.oracle = false;
  o.warmup = false;
  o.temperatures = {0.0f, 0.8f};
  Harness h(*target_, draft_, o);
  ASSERT_EQ(h.configs().size(), 4u);
  std::vector<BenchPrompt> prompts = {Prompts()[2]};
  h.Run(prompts, {}, nullptr);
  ASSERT_EQ(h.rows().size(), 4u);
  for (const BenchRow& r : h.rows()) {
    ASSERT_TRUE(r.lossless.has_value()) << r.config.Name();
    EXPECT_TRUE(*r.lossless) << r.config.Name() << " parts from ar at token " << r.first_divergence;
    EXPECT_TRUE(r.speedup.has_value());
  }
  const json s = Summarize(h.rows(), h.configs(), {"code"});
  EXPECT_TRUE(s["summary_by_temp"].contains("0.8"));
  EXPECT_DOUBLE_EQ(s["summary_by_temp"]["0.8"]["pld"]["lossless_rate"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["summary_by_temp"]["0.8"]["ar"]["speedup"].get<double>(), 1.0);
}

// Output positions restart at 0 every turn, so each turn of a sampled multi-turn prompt
// is its own stream: turn 2 is what ar samples for its prompt with stream 1.
TEST_F(HarnessTest, EachTurnIsSampledAsItsOwnStream) {
  HarnessOptions o = Options();
  o.methods = {};
  o.oracle = false;
  o.warmup = false;
  o.temperatures = {0.8f};
  o.keep_outputs = true;
  Harness h(*target_, draft_, o);
  h.Run({Prompts()[0]}, {}, nullptr);
  ASSERT_EQ(h.rows().size(), 1u);
  const BenchRow& ar = h.rows()[0];
  ASSERT_EQ(ar.outputs.size(), 2u);
  ASSERT_EQ(ar.prompts.size(), 2u);
  EngineConfig ec;
  ec.n_ctx = o.n_ctx;
  ec.n_threads = 1;
  ec.max_tree = 1;
  Engine engine(*target_, nullptr, ec);
  GenerateRequest req;
  req.prompt = ar.prompts[1];
  req.n_predict = o.n_predict;
  req.sampling.temperature = 0.8f;
  req.sampling.seed = ar.stats.seed;
  DecodeOptions d;
  d.method = Method::kAr;
  d.tree_budget = 1;
  req.sampling.stream = 1;
  EXPECT_EQ(engine.Generate(req, d).tokens, ar.outputs[1]);
  req.sampling.stream = 0;
  EXPECT_NE(engine.Generate(req, d).tokens, ar.outputs[1]);
}

// Fake llama.cpp tools (python, beside a table the test writes): they answer each
// prompt text from the table (tokens as our tokenizer counts them, the text to print) in
// the real tools' formats; llama-lookup is broken (exits 1). The harness must run them
// per prompt, compare their text with ar's, aggregate them apart, and keep a broken
// peer an error row.
void WriteFakePeers(const fs::path& dir, const json& table) {
  fs::create_directories(dir);
  std::ofstream(dir / "table.json") << table.dump();
  const std::string common = R"PY(#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
prompt = open(args[args.index("-f") + 1]).read()[:-1]
entry = json.load(open(os.path.join(os.path.dirname(__file__), "table.json")))[prompt]
n_tokens, echo, text = entry
)PY";
  auto write = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir / name) << common << body;
    fs::permissions(dir / name, fs::perms::owner_all);
  };
  write("llama-completion", R"PY(
sys.stdout.write(text + " [end of text]\n\n\n")
sys.stderr.write("x I common_perf_print: prompt eval time = 20.00 ms / %5d tokens (1 ms per token)\n" % n_tokens)
sys.stderr.write("x I common_perf_print:        eval time = 100.00 ms / 10 runs   (10 ms per token)\n")
)PY");
  write("llama-speculative-simple", R"PY(
sys.stdout.write("\n\n" + echo + "X" + text + "\n\n\n\n")  # not ar's text
sys.stderr.write("encoded %4d tokens in    0.020 seconds\ndecoded   13 tokens in    0.050 seconds\n" % n_tokens)
sys.stderr.write("n_drafted = 8\nn_accept  = 6\n")
)PY");
  write("llama-lookup", "sys.stderr.write('lookup: broken on purpose\\n'); sys.exit(1)\n");
}

TEST_F(HarnessTest, FakePeersAreRowsBesideOurs) {
  std::vector<BenchPrompt> prompts = Prompts();
  prompts.erase(prompts.begin());  // single-turn prompts: the table holds their first turn
  json table = json::object();
  std::map<std::string, std::string> ar_text;
  for (const BenchPrompt& p : prompts) {
    const std::string text = target_->ApplyChatTemplate({{"user", p.turns[0]}}, true);
    const std::vector<Token> tokens = target_->Tokenize(text, true, true);
    std::string echo;
    for (Token t : tokens) echo += target_->TokenToPiece(t, true);
    ar_text[p.id] = target_->Detokenize(GreedyReference(p));
    table[text] = {tokens.size(), echo, ar_text[p.id]};
  }
  WriteFakePeers(out_ / "bin", table);
  HarnessOptions o;
  o.methods = {Method::kPld};
  o.n_predict = 12;
  o.n_threads = 1;
  o.n_ctx = 1024;
  o.peers = {"llama-ar", "llama-ngram-mod", "llama-lookup"};
  o.peers_dir = (out_ / "bin").string();
  Harness h(*target_, draft_, o);
  ASSERT_EQ(h.configs().size(), 5u);
  EXPECT_EQ(h.configs()[2].Name(), "llama-ar");
  EXPECT_TRUE(h.configs()[2].is_peer());
  const RunStatus st = h.Run(prompts, {}, nullptr);
  ASSERT_EQ(st.prompts_done, 3);
  ASSERT_EQ(h.rows().size(), 15u);
  for (size_t i = 0; i < h.rows().size(); i += 5) {
    const BenchRow& ar = h.rows()[i];
    const BenchRow& llama_ar = h.rows()[i + 2];
    const BenchRow& mod = h.rows()[i + 3];
    const BenchRow& lookup = h.rows()[i + 4];
    SCOPED_TRACE(ar.prompt_id);
    ASSERT_EQ(ar.config.Name(), "ar");
    EXPECT_TRUE(llama_ar.error.empty()) << llama_ar.error;
    EXPECT_EQ(llama_ar.text, ar_text[ar.prompt_id]);
    EXPECT_EQ(llama_ar.lossless, std::optional<bool>(true));
    EXPECT_EQ(llama_ar.first_divergence, -1);
    ASSERT_TRUE(llama_ar.speedup.has_value());
    EXPECT_NEAR(*llama_ar.speedup, 90.0 / ar.decode_tps(), 1e-9);  // 10 decodes in 100 ms, the last to the end token
    EXPECT_EQ(llama_ar.stats.n_passes, 10);
    EXPECT_DOUBLE_EQ(llama_ar.wall_ms, 120.0);
    EXPECT_TRUE(mod.error.empty()) << mod.error;
    EXPECT_EQ(mod.lossless, std::optional<bool>(false));
    EXPECT_EQ(mod.first_divergence, 0);
    EXPECT_EQ(mod.stats.n_passes, 7);  // 13 tokens (-n 12, one past), 6 accepted drafts
    EXPECT_EQ(mod.stats.stop_reason, "length");
    EXPECT_EQ(mod.stats.n_accepted, 6);
    EXPECT_NEAR(*mod.speedup, 260.0 / ar.decode_tps(), 1e-9);
    EXPECT_NE(lookup.error.find("broken on purpose"), std::string::npos) << lookup.error;
    EXPECT_FALSE(lookup.speedup.has_value());
    EXPECT_FALSE(lookup.lossless.has_value());
  }
  const std::vector<std::string> cats = CategoryOrder(prompts);
  const json res = WriteResults(out_.string(), {json{{"date", "test"}}, &h.configs(), &cats, &h.rows(), &st});
  EXPECT_EQ(res["summary"]["llama-ar"]["lossless_rate"], 1.0);
  EXPECT_EQ(res["summary"]["llama-ar"]["peer"], true);
  EXPECT_EQ(res["summary"]["llama-ngram-mod"]["lossless_rate"], 0.0);
  EXPECT_EQ(res["summary"]["llama-lookup"]["errors"], 3);
  EXPECT_EQ(res["summary"]["llama-lookup"]["n"], 0);
  EXPECT_EQ(res["summary"]["pld"]["errors"], 0);
  std::ifstream md_in(out_ / "results.md");
  const std::string md((std::istreambuf_iterator<char>(md_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("| llama-ngram-mod |"), std::string::npos);
  EXPECT_NE(md.find("llama-lookup failed on 3 prompt(s)"), std::string::npos);
}

TEST_F(HarnessTest, PeerConfigurationErrors) {
  HarnessOptions o;
  o.peers = {"llama-ar"};
  o.peers_dir = (out_ / "nothing-here").string();
  try {
    Harness h(*target_, draft_, o);
    FAIL() << "missing tools accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scripts/setup.sh --peers"), std::string::npos) << e.what();
  }
  o.peers = {"llama-frobnicate"};
  EXPECT_THROW(Harness(*target_, draft_, o), Error);
  o.peers = {"llama-draft"};
  EXPECT_THROW(Harness(*target_, nullptr, o), Error);  // needs a draft model
}

// Whether scripts/setup.sh --peers has built every tool o.peers names in o.peers_dir.
bool PeersBuilt(const HarnessOptions& o) {
  std::vector<PeerSpec> specs;
  for (const auto& n : o.peers) specs.push_back(ParsePeer(n));
  return PeerRunner(o.peers_dir).Missing(specs).empty();
}

// The real tools, when scripts/setup.sh --peers has built them: plain, n-gram and draft
// rows on the tiny pair, all parsed. llama-ar's text must be ar's on these prompts (both
// decode one token per pass; the prefill batches differ by the last prompt token, which
// can move a near-tie on other models: on the default pair it does, once in a while).
TEST_F(HarnessTest, RealPeersOnTheTinyPair) {
  HarnessOptions o;
  o.n_predict = 12;
  o.n_threads = 1;
  o.n_ctx = 1024;
  o.peers = {"llama-ar", "llama-ngram-mod", "llama-draft"};
  o.peers_dir = DefaultPeersDir();
  if (!PeersBuilt(o)) GTEST_SKIP() << "llama.cpp's tools are not built in " << o.peers_dir << " (scripts/setup.sh --peers)";
  Harness h(*target_, draft_, o);
  const std::vector<BenchPrompt> prompts = {Prompts()[1], Prompts()[3]};
  const RunStatus st = h.Run(prompts, {}, nullptr);
  ASSERT_EQ(st.prompts_done, 2);
  for (const BenchRow& r : h.rows()) {
    SCOPED_TRACE(r.prompt_id + " " + r.config.Name());
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_GT(r.stats.n_generated, 0);
    EXPECT_TRUE(r.speedup.has_value());
    if (r.config.Name() == "llama-ar") {
      EXPECT_EQ(r.lossless, std::optional<bool>(true)) << r.text;
    }
    if (r.config.is_peer()) {
      EXPECT_EQ(r.stats.stop_reason, r.stats.n_generated >= 11 ? "length" : "eog");
    }
  }
}

// A prompt over llama.cpp's default batch of 2048 tokens (issue 48): every tool gives a
// row, none "the prompt exceeds the batch size" or an abort.
TEST_F(HarnessTest, RealPeersReadAPromptOverTheDefaultBatch) {
  HarnessOptions o;
  o.n_predict = 8;
  o.n_threads = 2;
  o.n_ctx = 4096;
  o.methods = {};
  o.oracle = false;
  o.warmup = false;
  o.peers = {"llama-ar", "llama-ngram-simple", "llama-lookup"};
  o.peers_dir = DefaultPeersDir();
  if (!PeersBuilt(o)) GTEST_SKIP() << "llama.cpp's tools are not built in " << o.peers_dir << " (scripts/setup.sh --peers)";
  BenchPrompt p = Prompts()[1];
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i) + " of a long report. ";
  p.turns = {text + p.turns[0]};
  ASSERT_GT(target_->Tokenize(target_->ApplyChatTemplate({{"user", p.turns[0]}}, true), true, true).size(), 2100u);
  Harness h(*target_, draft_, o);
  const RunStatus st = h.Run({p}, {}, nullptr);
  ASSERT_EQ(st.prompts_done, 1);
  for (const BenchRow& r : h.rows()) {
    SCOPED_TRACE(r.config.Name());
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_GT(r.stats.n_generated, 0);
    EXPECT_GT(r.stats.n_prompt, 2100);
  }
}

TEST_F(HarnessTest, ConfigurationErrors) {
  HarnessOptions o = Options();
  EXPECT_THROW(Harness(*target_, nullptr, o), Error);  // draft methods without a draft
  o.methods = {Method::kRest};
  EXPECT_THROW(Harness(*target_, draft_, o), Error);  // rest without --index
  o.methods = {Method::kPld};
  o.budgets = {0};
  EXPECT_THROW(Harness(*target_, draft_, o), Error);
  o.budgets = {4};
  o.price_profiles.clear();  // a modelled column needs a profile to price it
  EXPECT_THROW(Harness(*target_, draft_, o), Error);
}

// --fixed-budget's modelled columns: every row priced by the measured profile and by its
// rows-free form (RowsFreeProfile), each against ar's row priced the same way.
TEST_F(HarnessTest, ModelledSpeedupUnderEachNamedProfile) {
  HarnessOptions o;
  o.methods = {Method::kTree, Method::kGraft};
  o.budgets = {4, 8};
  o.n_predict = 8;
  o.n_threads = 1;
  o.n_ctx = 1024;
  o.warmup = false;
  o.decode.adaptive = false;  // --fixed-budget
  o.decode.skip_draft_gain = 0;
  o.price_profiles = {PriceProfile::kMeasured, PriceProfile::kRowsFree};
  Harness h(*target_, draft_, o);
  h.Run({Prompts()[2]}, {}, nullptr);
  ASSERT_TRUE(h.profile().has_value());
  const CostModel measured = CostModel::Of(*h.profile()), rows_free = CostModel::Of(RowsFreeProfile(*h.profile()));
  ASSERT_EQ(h.rows().size(), 5u);
  const BenchRow& ar = h.rows()[0];
  ASSERT_EQ(ar.config.method, Method::kAr);
  for (const BenchRow& r : h.rows()) {
    SCOPED_TRACE(r.config.Name());
    ASSERT_EQ(r.modelled_by.size(), 2u);
    ASSERT_TRUE(r.modelled_speedup.has_value());
    EXPECT_DOUBLE_EQ(r.modelled_by.at("measured"), *r.modelled_speedup);
    auto speedup = [&](const CostModel& c) {
      return (r.stats.n_generated / ModelledMs(r.stats, c)) / (ar.stats.n_generated / ModelledMs(ar.stats, c));
    };
    EXPECT_NEAR(r.modelled_by.at("measured"), speedup(measured), 1e-12);
    EXPECT_NEAR(r.modelled_by.at("rows-free"), speedup(rows_free), 1e-12);
    if (r.config.method != Method::kAr) {
      EXPECT_GT(r.stats.n_draft_passes, 0);  // graft too: the policy is off
    }
  }
}

}  // namespace
}  // namespace graft::bench
