// Benchmark reports: the summary statistics and the three result files.
//
// results.json  (schema "graft-bench/1")
//   status      {state: running | complete | interrupted, complete, interrupted,
//                prompts_done, prompts_total, skipped[{prompt_id, category, prompt_tokens,
//                cap, reason: "too long" | "duplicate", same_as: the duplicate's first}]}
//   date, command, flags, machine, models, llama_cpp, dataset   (from the caller's `meta`)
//   configs     [{name, method, budget, temperature}] in run order
//   summary     the first temperature of --temps: key -> entry, where key is
//                 "ar", "<method>@<budget>" for every configuration, and
//                 "<method>" = the entry of that method's best budget (highest speedup;
//                 it carries "budget" and "config" to say which)
//   summary_by_temp  {"<temperature %g>": same map} for every temperature
//   rows        one object per prompt x configuration x repetition (RowJson; with
//               pass_rows / draft_pass_rows, the passes by rows, and pass_context /
//               pass_row_context, their contexts summed, and read_products, a lazy
//               pass's products by rows, to re-price a run)
//   steadiness  ar's ms per target pass over its rows {n, min, median, max, spread =
//               max / min, steady = spread <= kSteadySpread}; null without ar rows. ar
//               does the same work in every pass, so a wide spread is the machine's
//               noise (a busy neighbour, a VM slowing down), which every ratio carries.
//               of_profile: the median over ar's rows of its pass time / the cost
//               profile's price for its passes (null without a profile); outside
//               kProfileMatch the report says the profile does not match the run.
// An entry: n, speedup (mean over prompts of decode tokens/s / ar's), speedup_ci95 ([low,
// high]: the 95% Student's t interval of that mean over the entry's rows; null below two
// rows; overall entries only), e2e_speedup (mean
// of ar's wall ms for as many tokens / the row's wall ms, prefill included),
// modelled_speedup (mean of BenchRow::modelled_speedup; null for peers), tokens_per_s, wall_tokens_per_s, tau (sum new tokens
// / sum passes), acceptance, nodes_per_pass, lossless_rate (share of rows whose
// outputs equal ar's with the same seed; peers' at temperature 0 only, null otherwise),
// oracle_fraction (mean speedup / oracle's, with --oracle), new_tokens,
// ms_per_pass {draft, retrieve, graft, verify, commit}, prefill_ms, per_source
// {name: {proposed, accepted, acceptance}}, categories {name: {n, speedup, e2e_speedup,
// modelled_speedup, tau, acceptance, lossless_rate, tokens_per_s}}, draft_passes,
// draft_passes_per_step (draft passes / target passes), modelled_by {profile: mean of
// BenchRow::modelled_by; only the profiles priced}.
//
// fixed_budget  (`graft bench --fixed-budget` only) FixedBudgetJson: the paper's table.
// elapsed_s     (from `meta`) the command's wall seconds so far, loading included.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness.h"

namespace graft::bench {

// "0", "0.7": the key of a temperature in summary_by_temp.
std::string TempKey(float t);

nlohmann::json RowJson(const BenchRow& row);

// Largest max / min of ar's ms per pass still called steady. Context length alone moves
// it by a few percent (a 1024-token prompt's attention); 30% is not from the work.
inline constexpr double kSteadySpread = 1.3;
// ar's passes over the profile's price (steadiness.of_profile) within which the cost
// profile is taken to match the run: the spread of one profile's 1-row pass between
// measurements on a quiet 2-core EPYC (44.6-48.7 ms) is about 10%.
inline constexpr std::pair<double, double> kProfileMatch = {0.87, 1.15};

// {"summary": ..., "summary_by_temp": ..., "steadiness": ...} as documented above.
nlohmann::json Summarize(const std::vector<BenchRow>& rows, const std::vector<BenchConfig>& configs,
                         const std::vector<std::string>& categories);

// One CSV line per row, with a header line.
std::string CsvText(const std::vector<BenchRow>& rows);

// Spec-Bench-style Markdown: per temperature a table (rows = configurations, columns =
// categories + overall, cells "speedup (tau)"), then statistics and per-source tables.
std::string MarkdownText(const nlohmann::json& results, const std::vector<std::string>& categories);

// The paper's claim at one budget: graft's tau at least the dense tree's with at most
// this share of its verified nodes per pass.
inline constexpr double kClaimNodeShare = 0.6;

// The fixed-budget table from Summarize's "summary_by_temp" and the run's configurations
// (peers left out):
//   model_profiles  the names of `model_profiles`, in order
//   rows    [{temperature, config, method, budget, n, tau, nodes_per_pass (verified nodes
//           / target passes), draft_passes_per_step (draft passes / target passes),
//           per_source {name: {proposed, accepted, acceptance}}, speedup (the clock's),
//           modelled {profile: mean modelled speedup, or null}}] in run order, ar first
//   claims  [{temperature, budget, graft_tau, tree_tau, graft_nodes_per_pass,
//           tree_nodes_per_pass, nodes_share (graft's / tree's), tau_holds, nodes_holds
//           (share <= kClaimNodeShare), holds, sentence (ClaimSentence)}], one per
//           temperature and budget at which both graft and tree have passes
nlohmann::json FixedBudgetJson(const nlohmann::json& summary_by_temp, const std::vector<BenchConfig>& configs,
                               const std::vector<std::string>& model_profiles);

// One claims entry as a sentence: "N=16: graft's tau 2.31 against tree's 2.10, with
// 45.0% of its verified nodes per pass: the claim holds (...)".
std::string ClaimSentence(const nlohmann::json& claim);

struct ReportInput {
  nlohmann::json meta;  // date, command, flags, machine, models, llama_cpp, dataset, elapsed_s
  const std::vector<BenchConfig>* configs = nullptr;
  const std::vector<std::string>* categories = nullptr;
  const std::vector<BenchRow>* rows = nullptr;
  const RunStatus* status = nullptr;
  bool fixed_budget = false;                // add the fixed-budget table (FixedBudgetJson)
  std::vector<std::string> model_profiles;  // its modelled columns (PriceProfileName)
};

// The whole results.json document.
nlohmann::json ResultsJson(const ReportInput& in);

// Rewrites results.json, results.csv and results.md in `dir` (created if needed).
// Returns the results.json document.
nlohmann::json WriteResults(const std::string& dir, const ReportInput& in);

}  // namespace graft::bench
