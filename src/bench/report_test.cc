// The report's steadiness figure, on hand-made rows (no model): ar's ms per pass over
// its rows, and the warning results.md gives when they spread. Also the fixed-budget
// table (the paper's: tau, nodes per pass, draft passes per step, the claim) and the
// rows-free cost profile its modelled column prices passes by.
#include "bench/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/cost_model.h"
#include "graft/cost_profile.h"
#include "graft/error.h"

namespace graft::bench {
namespace {

using nlohmann::json;

BenchRow Row(Method method, double verify_ms, int32_t passes, const std::string& peer = "") {
  BenchRow r;
  r.prompt_id = std::string("p");  // (not = "p": GCC 12 -Wrestrict false positive, PR 105329)
  r.category = std::string("chat");
  r.config.method = method;
  r.config.budget = method == Method::kAr ? 0 : 16;
  r.config.peer = peer;
  r.stats.n_passes = passes;
  r.stats.n_generated = passes;
  r.stats.t_verify_ms = verify_ms;
  r.stats.t_decode_ms = verify_ms;
  return r;
}

std::vector<BenchConfig> Configs() {
  BenchConfig ar, graft;
  graft.method = Method::kGraft;
  graft.budget = 16;
  return {ar, graft};
}

TEST(ReportTest, SteadinessIsArsPassTimeAcrossItsRows) {
  // ar: 80, 90 and 100 ms per pass; graft's and a peer's rows do not count.
  std::vector<BenchRow> rows = {Row(Method::kAr, 800, 10), Row(Method::kGraft, 5000, 10),
                                Row(Method::kAr, 1800, 20), Row(Method::kAr, 500, 5),
                                Row(Method::kAr, 9000, 10, "llama-ar")};
  const json s = Summarize(rows, Configs(), {"chat"})["steadiness"];
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["n"].get<int>(), 3);
  EXPECT_DOUBLE_EQ(s["min"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(s["median"].get<double>(), 90.0);
  EXPECT_DOUBLE_EQ(s["max"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(s["spread"].get<double>(), 1.25);
  EXPECT_TRUE(s["steady"].get<bool>());

  // Without ar rows there is nothing to judge by.
  EXPECT_TRUE(Summarize({Row(Method::kGraft, 500, 5)}, Configs(), {"chat"})["steadiness"].is_null());
}

TEST(ReportTest, GivesTheSpeedupsIntervalOverItsRows) {
  // graft's rows at 1.0x, 1.2x and 1.4x: mean 1.2, s = 0.2, t(0.975, 2) = 4.303, so
  // 1.2 -/+ 4.303 * 0.2 / sqrt(3).
  std::vector<BenchRow> rows = {Row(Method::kAr, 800, 10)};
  for (double s : {1.0, 1.4, 1.2}) {
    rows.push_back(Row(Method::kGraft, 800, 10));
    rows.back().speedup = s;
  }
  const json table = Summarize(rows, Configs(), {"chat"})["summary_by_temp"]["0"];
  const json ci = table["graft@16"]["speedup_ci95"];
  ASSERT_TRUE(ci.is_array());
  const double half = 4.303 * 0.2 / std::sqrt(3.0);
  EXPECT_NEAR(ci[0].get<double>(), 1.2 - half, 1e-9);
  EXPECT_NEAR(ci[1].get<double>(), 1.2 + half, 1e-9);
  // One row has no interval; many rows use the normal's tail, near 1.96.
  EXPECT_TRUE(table["ar"]["speedup_ci95"].is_null());
  rows.resize(1);
  for (int i = 0; i < 200; ++i) {
    rows.push_back(Row(Method::kGraft, 800, 10));
    rows.back().speedup = i % 2 ? 1.1 : 0.9;
  }
  const json wide = Summarize(rows, Configs(), {"chat"})["summary_by_temp"]["0"]["graft@16"]["speedup_ci95"];
  const double sd = std::sqrt(200 * 0.01 / 199.0);
  EXPECT_NEAR(wide[1].get<double>() - 1.0, 1.972 * sd / std::sqrt(200.0), 1e-3);
}

TEST(ReportTest, MarkdownWarnsWhenTheMachineWasNotSteady) {
  json res;
  res["configs"] = json::array();
  res["summary_by_temp"] = json::object();
  res["status"] = json::object();
  std::vector<BenchRow> rows = {Row(Method::kAr, 800, 10), Row(Method::kAr, 1000, 10)};
  res["steadiness"] = Summarize(rows, Configs(), {"chat"})["steadiness"];
  std::string md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("ar's target pass took 90.0 ms (median; 80.0-100.0 over its 2 rows)."), std::string::npos) << md;
  EXPECT_EQ(md.find("not steady"), std::string::npos) << md;

  rows.push_back(Row(Method::kAr, 2400, 10));  // 240 ms a pass: the machine slowed down
  res["steadiness"] = Summarize(rows, Configs(), {"chat"})["steadiness"];
  EXPECT_FALSE(res["steadiness"]["steady"].get<bool>());
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("**The machine was not steady**: the same work took 3.00x as long"), std::string::npos) << md;
  EXPECT_TRUE(res["steadiness"]["of_profile"].is_null());  // no profile priced the rows
  EXPECT_EQ(md.find("cost profile's price"), std::string::npos) << md;
}

// ar's passes against the cost profile's price for them: the median ratio, and a
// warning when the profile does not match the run (priced 1.25x what they took).
TEST(ReportTest, SaysWhenTheCostProfileDoesNotMatchTheRun) {
  json res;
  res["configs"] = json::array();
  res["summary_by_temp"] = json::object();
  res["status"] = json::object();
  std::vector<BenchRow> rows = {Row(Method::kAr, 800, 10), Row(Method::kAr, 1000, 10), Row(Method::kAr, 900, 10)};
  for (BenchRow& r : rows) r.modelled_ms = r.stats.t_verify_ms * 1.05;  // priced 5% dear: a match
  res["steadiness"] = Summarize(rows, Configs(), {"chat"})["steadiness"];
  EXPECT_NEAR(res["steadiness"]["of_profile"].get<double>(), 1 / 1.05, 1e-12);
  std::string md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("They ran at 0.95x the cost profile's price"), std::string::npos) << md;
  EXPECT_EQ(md.find("does not match"), std::string::npos) << md;
  for (BenchRow& r : rows) r.modelled_ms = r.stats.t_verify_ms * 1.25;
  res["steadiness"] = Summarize(rows, Configs(), {"chat"})["steadiness"];
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("They ran at 0.80x the cost profile's price"), std::string::npos) << md;
  EXPECT_NE(md.find("**The cost profile does not match this run**"), std::string::npos) << md;
  EXPECT_NE(md.find("every extra row was priced cheaper than it was"), std::string::npos) << md;
  for (BenchRow& r : rows) r.modelled_ms = r.stats.t_verify_ms / 1.3;
  res["steadiness"] = Summarize(rows, Configs(), {"chat"})["steadiness"];
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("priced dearer than it was"), std::string::npos) << md;
}

// The profile the run was priced with (results.json "profile", as it is cached): the
// ratios graft sized its trees by, which move between tunes on a drifting machine.
TEST(ReportTest, NamesTheRatiosOfTheCostProfileItWasPricedWith) {
  json res;
  res["configs"] = json::array();
  res["summary_by_temp"] = json::object();
  res["status"] = json::object();
  res["steadiness"] = Summarize({Row(Method::kAr, 800, 10)}, Configs(), {"chat"})["steadiness"];
  std::string md = MarkdownText(res, {"chat"});
  EXPECT_EQ(md.find("The cost profile (measured"), std::string::npos) << md;
  res["profile"] = {{"measured_at", "2026-12-03T15:26:35Z"},
                    {"verify_ms", {0.0, 40.0, 60.0, 80.0, 100.0, 120.0}},
                    {"read_row_ms", 8.0}};
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("The cost profile (measured 2026-12-03T15:26:35Z) priced 2, 3 and 4 rows at 1.50x, 2.00x "
                    "and 2.50x one row (40.0 ms), and each row a lazy pass reads after its root at 8.00 ms."),
            std::string::npos)
      << md;
  res["profile"]["verify_ms"] = {0.0, 40.0, 50.0};  // a 2-row profile; no reads priced
  res["profile"]["read_row_ms"] = 0.0;
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("priced 2 rows at 1.25x one row (40.0 ms)."), std::string::npos) << md;
  res["profile"]["verify_ms"] = {0.0, 0.0};  // nothing usable: no sentence
  md = MarkdownText(res, {"chat"});
  EXPECT_EQ(md.find("The cost profile (measured"), std::string::npos) << md;
}

// What no method can beat on the machine (CostModel::CeilingSpeedup), at the run's
// largest budget: 40 ms a row, 20 ms more each further row, rows read in products of
// 2 (8 ms alone, 12 together): 4 rows emit 4 tokens for 100 + 4 + 8 + 4 ms, 1.38x.
TEST(ReportTest, NamesTheCeilingOfAnyMethodUnderTheProfile) {
  json res;
  res["configs"] = json::array({{{"name", "ar"}, {"budget", 0}}, {{"name", "graft@4"}, {"budget", 4}},
                                {{"name", "llama-lookup"}, {"budget", 16}, {"peer", true}}});
  res["rows"] = json::array();
  res["summary_by_temp"] = json::object();
  res["status"] = json::object();
  res["steadiness"] = Summarize({Row(Method::kAr, 800, 10)}, Configs(), {"chat"})["steadiness"];
  res["profile"] = {{"measured_at", "2026-12-07T05:00:00Z"},   {"verify_ms", {0.0, 40.0, 60.0, 80.0, 100.0, 120.0}},
                    {"draft_ms", json::array()},               {"read_row_ms", 8.0},
                    {"read_ahead_ms", 4.0},                    {"read_product_ms", {0.0, 8.0, 12.0}}};
  std::string md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("By it, a proposer that is always right would gain at most 1.38x over ar (modelled: chains of "
                    "4 rows, their reads included, in trees of up to 4 rows): the ceiling of graft's methods"),
            std::string::npos)
      << md;
  res["configs"][1]["budget"] = 2;  // 2 rows: 80 / (60 + 4)
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("at most 1.25x over ar (modelled: chains of 2 rows"), std::string::npos) << md;
  res["configs"][1]["budget"] = 64;  // past the measured sizes: priced up to the last, 5 rows
  md = MarkdownText(res, {"chat"});
  EXPECT_NE(md.find("in trees of up to 5 rows)"), std::string::npos) << md;
  res["profile"].erase("read_product_ms");  // rows read ahead without their curve: no bound to give
  md = MarkdownText(res, {"chat"});
  EXPECT_EQ(md.find("always right"), std::string::npos) << md;
  EXPECT_NE(md.find("The cost profile (measured"), std::string::npos) << md;
}

// A fixed-budget row by hand: `passes` target passes emitting `tokens`, `nodes` verified
// nodes, `draft_passes` draft passes, draft nodes proposed / accepted, suffix likewise.
BenchRow FixedRow(Method method, int32_t budget, int32_t passes, int32_t tokens, int64_t nodes,
                  int64_t draft_passes, SourceCounts draft, SourceCounts suffix) {
  BenchRow r = Row(method, 10.0 * passes, passes);
  r.config.budget = method == Method::kAr ? 0 : budget;
  r.stats.n_generated = tokens;
  r.stats.nodes_verified = nodes;
  r.stats.n_draft_passes = draft_passes;
  r.stats.per_source[static_cast<int>(Source::kDraft)] = draft;
  r.stats.per_source[static_cast<int>(Source::kRequest)] = suffix;
  r.speedup = static_cast<double>(tokens) / passes;
  r.modelled_by = {{"measured", 1.5}, {"rows-free", 2.5}};
  return r;
}

std::vector<BenchConfig> FixedConfigs() {
  std::vector<BenchConfig> c = {BenchConfig{}};
  for (Method m : {Method::kTree, Method::kGraft}) {
    for (int32_t b : {8, 16}) c.push_back({m, b});
  }
  return c;
}

// ar and tree / graft at budgets 8 and 16, two prompts each. graft@8 reaches tree@8's
// tau with half its nodes (the claim holds); graft@16 falls short on tau.
std::vector<BenchRow> FixedRows(double graft16_tokens) {
  std::vector<BenchRow> rows;
  for (int p = 0; p < 2; ++p) {
    rows.push_back(FixedRow(Method::kAr, 0, 20, 20, 20, 0, {}, {}));
    // tree@8: 2 x (10 passes, 25 tokens, 80 nodes, 40 draft passes): tau 2.5, 8 nodes a pass, 4 draft passes a step.
    rows.push_back(FixedRow(Method::kTree, 8, 10, 25, 80, 40, {70, 15}, {}));
    rows.push_back(FixedRow(Method::kTree, 16, 10, 30, 160, 50, {150, 20}, {}));
    // graft@8: tau 2.5 with 4 nodes a pass (50% of tree's), 1.5 draft passes a step.
    rows.push_back(FixedRow(Method::kGraft, 8, 10, 25, 40, 15, {20, 10}, {10, 5}));
    rows.push_back(FixedRow(Method::kGraft, 16, 10, static_cast<int32_t>(graft16_tokens), 60, 20, {30, 10}, {20, 10}));
  }
  return rows;
}

TEST(FixedBudgetTest, TableHasTauNodesAndDraftPassesPerStep) {
  const std::vector<BenchRow> rows = FixedRows(28);
  const json sum = Summarize(rows, FixedConfigs(), {"chat"});
  const json fb = FixedBudgetJson(sum["summary_by_temp"], FixedConfigs(), {"measured", "rows-free"});
  ASSERT_EQ(fb["rows"].size(), 5u);  // ar, tree@8, tree@16, graft@8, graft@16
  EXPECT_EQ(fb["model_profiles"], json({"measured", "rows-free"}));
  const json& ar = fb["rows"][0];
  EXPECT_EQ(ar["method"], "ar");
  EXPECT_DOUBLE_EQ(ar["tau"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(ar["draft_passes_per_step"].get<double>(), 0.0);
  const json& tree8 = fb["rows"][1];
  EXPECT_EQ(tree8["config"], "tree@8");
  EXPECT_EQ(tree8["budget"], 8);
  EXPECT_EQ(tree8["n"], 2);
  EXPECT_DOUBLE_EQ(tree8["tau"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(tree8["nodes_per_pass"].get<double>(), 8.0);       // 160 nodes / 20 passes
  EXPECT_DOUBLE_EQ(tree8["draft_passes_per_step"].get<double>(), 4.0);  // 80 draft passes / 20 passes
  EXPECT_EQ(tree8["per_source"]["draft"]["proposed"], 140);
  EXPECT_DOUBLE_EQ(tree8["per_source"]["draft"]["acceptance"].get<double>(), 30.0 / 140);
  EXPECT_FALSE(tree8["per_source"].contains("suffix"));  // proposed nothing
  const json& graft16 = fb["rows"][4];
  EXPECT_EQ(graft16["config"], "graft@16");
  EXPECT_DOUBLE_EQ(graft16["tau"].get<double>(), 2.8);
  EXPECT_DOUBLE_EQ(graft16["nodes_per_pass"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(graft16["draft_passes_per_step"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(graft16["per_source"]["suffix"]["acceptance"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(graft16["speedup"].get<double>(), 2.8);
  EXPECT_DOUBLE_EQ(graft16["modelled"]["measured"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(graft16["modelled"]["rows-free"].get<double>(), 2.5);
  // Only the profiles asked for, null where the rows have none.
  const json one = FixedBudgetJson(sum["summary_by_temp"], FixedConfigs(), {"measured"});
  EXPECT_FALSE(one["rows"][1]["modelled"].contains("rows-free"));
  std::vector<BenchRow> unpriced = rows;
  for (BenchRow& r : unpriced) r.modelled_by.clear();
  const json none = FixedBudgetJson(Summarize(unpriced, FixedConfigs(), {"chat"})["summary_by_temp"], FixedConfigs(),
                                    {"rows-free"});
  EXPECT_TRUE(none["rows"][1]["modelled"]["rows-free"].is_null());
}

TEST(FixedBudgetTest, ClaimIsComputedAndFlipsWithTheNumbers) {
  json fb = FixedBudgetJson(Summarize(FixedRows(28), FixedConfigs(), {"chat"})["summary_by_temp"], FixedConfigs(), {});
  ASSERT_EQ(fb["claims"].size(), 2u);
  const json& at8 = fb["claims"][0];
  EXPECT_EQ(at8["budget"], 8);
  EXPECT_DOUBLE_EQ(at8["nodes_share"].get<double>(), 0.5);
  EXPECT_TRUE(at8["holds"].get<bool>());
  EXPECT_EQ(at8["sentence"], "N=8: graft's tau 2.50 against tree's 2.50, with 50.0% of tree's verified nodes per pass "
                             "(4.0 against 8.0): the claim holds.");
  // At 16: tau 2.8 < 3.0, nodes 6 / 16 = 37.5%.
  const json& at16 = fb["claims"][1];
  EXPECT_FALSE(at16["tau_holds"].get<bool>());
  EXPECT_TRUE(at16["nodes_holds"].get<bool>());
  EXPECT_FALSE(at16["holds"].get<bool>());
  EXPECT_EQ(at16["sentence"], "N=16: graft's tau 2.80 against tree's 3.00, with 37.5% of tree's verified nodes per "
                              "pass (6.0 against 16.0): the claim does not hold (graft's tau is below tree's).");
  // graft@16 at tau 3.2: the claim holds there too.
  fb = FixedBudgetJson(Summarize(FixedRows(32), FixedConfigs(), {"chat"})["summary_by_temp"], FixedConfigs(), {});
  EXPECT_TRUE(fb["claims"][1]["holds"].get<bool>());
  // graft@8 verifying 6 nodes a pass of tree's 8 (75%): the node half fails.
  std::vector<BenchRow> rows = FixedRows(32);
  for (BenchRow& r : rows) {
    if (r.config.method == Method::kGraft && r.config.budget == 8) r.stats.nodes_verified = 60;
  }
  fb = FixedBudgetJson(Summarize(rows, FixedConfigs(), {"chat"})["summary_by_temp"], FixedConfigs(), {});
  EXPECT_FALSE(fb["claims"][0]["nodes_holds"].get<bool>());
  EXPECT_TRUE(fb["claims"][0]["tau_holds"].get<bool>());
  EXPECT_NE(fb["claims"][0]["sentence"].get<std::string>().find(
                "the claim does not hold (graft verified more than 60% of tree's nodes)"),
            std::string::npos);
  // Without tree there is nothing to compare with.
  std::vector<BenchConfig> no_tree = {BenchConfig{}, {Method::kGraft, 8}};
  EXPECT_TRUE(FixedBudgetJson(Summarize(rows, no_tree, {"chat"})["summary_by_temp"], no_tree, {})["claims"].empty());
}

TEST(FixedBudgetTest, ResultsHaveTheTableOnlyInFixedBudgetMode) {
  const std::vector<BenchRow> rows = FixedRows(28);
  const std::vector<BenchConfig> configs = FixedConfigs();
  const std::vector<std::string> cats = {"chat"};
  RunStatus st;
  st.prompts_total = st.prompts_done = 2;
  ReportInput in{json::object(), &configs, &cats, &rows, &st};
  EXPECT_FALSE(ResultsJson(in).contains("fixed_budget"));
  EXPECT_EQ(MarkdownText(ResultsJson(in), cats).find("Fixed budget"), std::string::npos);
  in.fixed_budget = true;
  in.model_profiles = {"measured", "rows-free"};
  in.meta["elapsed_s"] = 90.0;
  in.meta["profile"] = {{"verify_ms", {0.0, 40.0, 60.0}}, {"draft_ms", {0.0, 10.0, 12.0}}};
  const json res = ResultsJson(in);
  ASSERT_TRUE(res.contains("fixed_budget"));
  const std::string md = MarkdownText(res, cats);
  EXPECT_NE(md.find("- took: 1.5 min (90 s wall clock"), std::string::npos) << md;
  EXPECT_NE(md.find("| Method | N | prompts | tau | nodes/pass | draft passes/step | acceptance per source | "
                    "speedup (clock) | modelled (measured) | modelled (rows-free) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| graft | 16 | 2 | 2.80 | 6.0 | 2.00 | draft 33.3% (20/60), suffix 50.0% (20/40) | 2.80x | "
                    "1.50x | 2.50x |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ar | - | 2 | 1.00 | 1.0 | 0.00 | - |"), std::string::npos) << md;
  // The rows-free column says what it priced a pass at, and that it is modelled.
  EXPECT_NE(md.find("every target pass priced at this machine's 1-row pass (40.0 ms), every draft pass at the "
                    "draft's 1-row pass (10.0 ms, 0.25x a target pass)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("(measured up to 2 rows; larger passes priced by extending its last slope)"), std::string::npos);
  EXPECT_NE(md.find("not measured"), std::string::npos);
  EXPECT_NE(md.find("- N=8: graft's tau 2.50 against tree's 2.50"), std::string::npos) << md;
}

// rows-free: every pass at its model's 1-row price (its context still counts, per pass,
// not per row), reads free; the draft / target ratio is the measured one.
TEST(FixedBudgetTest, RowsFreeProfilePricesEveryPassAtOneRow) {
  CostProfile m;
  m.verify_ms = {0, 40, 60, 80, 100};
  m.draft_ms = {0, 10, 14, 18};
  m.prefix = 256;
  m.long_prefix = 1256;
  m.verify_ms_long = {0, 50, 80, 0, 140};  // 1 row: 10 ms more over 1000 more tokens
  m.draft_ms_long = {0, 12, 0, 22};
  m.read_row_ms = 8;
  m.read_ahead_ms = 4;
  m.read_product_ms = {0, 8, 12};
  const CostProfile rf = RowsFreeProfile(m);
  EXPECT_EQ(rf.verify_ms, (std::vector<double>{0, 40, 40, 40, 40}));
  EXPECT_EQ(rf.draft_ms, (std::vector<double>{0, 10, 10, 10}));
  EXPECT_EQ(rf.verify_ms_long, (std::vector<double>{0, 50, 50, 0, 50}));
  EXPECT_EQ(rf.read_row_ms, 0);
  const CostModel c = CostModel::Of(rf);
  EXPECT_DOUBLE_EQ(c.VerifyMs(4), 40);
  EXPECT_DOUBLE_EQ(c.VerifyMs(64), 40);  // past the measured sizes, still flat
  EXPECT_DOUBLE_EQ(c.DraftMs(8), 10);
  // A 1-row and a 4-row pass, both at 1256 tokens: 50 ms each.
  EXPECT_NEAR(c.VerifyPassesMs({0, 1, 0, 0, 1}, 2 * 1256.0, 5 * 1256.0), 100.0, 1e-9);
  // ModelledMs: 3 target passes (1, 4, 4 rows at the prefix), 5 draft passes of 1-3
  // rows, 6 rows read: 3 x 40 + 5 x 10 + 0.
  GenerationStats st;
  st.pass_rows = {0, 1, 0, 0, 2};
  st.pass_context = 3 * 256.0;
  st.pass_row_context = 9 * 256.0;
  st.draft_pass_rows = {0, 2, 1, 2};
  st.rows_read = 6;
  st.n_accepted = 6;
  EXPECT_NEAR(ModelledMs(st, c), 170.0, 1e-9);
  EXPECT_GT(ModelledMs(st, CostModel::Of(m)), 170.0);  // the measured profile charges the rows

  EXPECT_EQ(ParsePriceProfile("rows-free"), PriceProfile::kRowsFree);
  EXPECT_EQ(PriceProfileName(ParsePriceProfile("measured")), "measured");
  try {
    ParsePriceProfile("gpu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model profile 'gpu' (profiles: measured, rows-free)"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace graft::bench
