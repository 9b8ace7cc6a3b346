// The report's steadiness figure, on hand-made rows (no model): ar's ms per pass over
// its rows, and the warning results.md gives when they spread.
#include "bench/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace graft::bench
