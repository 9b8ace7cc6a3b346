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
// / sum passes), acceptance, nodes_per_pass, lossless_rate (temperature 0 rows; null
// otherwise), oracle_fraction (mean speedup / oracle's, with --oracle), new_tokens,
// ms_per_pass {draft, retrieve, graft, verify, commit}, prefill_ms, per_source
// {name: {proposed, accepted, acceptance}}, categories {name: {n, speedup, e2e_speedup,
// modelled_speedup, tau, acceptance, lossless_rate, tokens_per_s}}.
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

struct ReportInput {
  nlohmann::json meta;  // date, command, flags, machine, models, llama_cpp, dataset
  const std::vector<BenchConfig>* configs = nullptr;
  const std::vector<std::string>* categories = nullptr;
  const std::vector<BenchRow>* rows = nullptr;
  const RunStatus* status = nullptr;
};

// The whole results.json document.
nlohmann::json ResultsJson(const ReportInput& in);

// Rewrites results.json, results.csv and results.md in `dir` (created if needed).
// Returns the results.json document.
nlohmann::json WriteResults(const std::string& dir, const ReportInput& in);

}  // namespace graft::bench
