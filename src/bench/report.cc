#include "bench/report.h"

#include "graft/stats_json.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "bench/peers.h"
#include "engine/cost_model.h"
#include "graft/atomic_file.h"
#include "graft/cost_profile.h"
#include "graft/error.h"

namespace graft::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

double Div(double a, double b) { return b != 0 ? a / b : 0.0; }

// Student's t quantile at 0.975 for `df` degrees of freedom (two-sided 95%): the
// table up to 30, then the Cornish-Fisher expansion around the normal's 1.96 (within
// 0.001 of the exact quantile there).
double T975(int64_t df) {
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df >= 1 && df <= 30) return kTable[df - 1];
  const double z = 1.959964, d = static_cast<double>(df);
  return z + (z * z * z + z) / (4 * d) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * d * d);
}

// The 95% confidence interval of the mean of `v` (Student's t over its values), or
// null with fewer than two values. The rows of a run are its prompts (and repetitions),
// each a ratio paired with ar's on the same prompt: the interval says how far the
// machine's noise and the prompts' variety leave the mean uncertain.
json MeanInterval(const std::vector<double>& v) {
  if (v.size() < 2) return nullptr;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const double half = T975(static_cast<int64_t>(v.size()) - 1) *
                      std::sqrt(ss / static_cast<double>(v.size() - 1) / static_cast<double>(v.size()));
  // A speedup is positive: a wide interval of few rows stops at 0.
  return json::array({std::max(0.0, mean - half), mean + half});
}

// Aggregates over a set of rows (one configuration, maybe one category).
struct Agg {
  int64_t n = 0;
  double speedup_sum = 0, e2e_sum = 0, tps_sum = 0, wall_tps_sum = 0, oracle_sum = 0, modelled_sum = 0;
  int64_t speedup_n = 0, e2e_n = 0, oracle_n = 0, compared_n = 0, lossless_n = 0, modelled_n = 0;
  int64_t errors = 0;     // peer rows whose tool gave no result (not in the other figures)
  std::vector<double> speedups;  // each row's speedup, for the interval of their mean
  std::map<std::string, std::pair<double, int64_t>> modelled_by;  // profile -> (sum, rows)
  GenerationStats total;  // counts and times summed over the rows

  void Add(const BenchRow& r) {
    if (!r.error.empty()) {
      ++errors;
      return;
    }
    ++n;
    if (r.speedup) { speedup_sum += *r.speedup; ++speedup_n; speedups.push_back(*r.speedup); }
    if (r.e2e_speedup) { e2e_sum += *r.e2e_speedup; ++e2e_n; }
    if (r.oracle_fraction) { oracle_sum += *r.oracle_fraction; ++oracle_n; }
    if (r.modelled_speedup) { modelled_sum += *r.modelled_speedup; ++modelled_n; }
    for (const auto& [name, v] : r.modelled_by) {
      modelled_by[name].first += v;
      ++modelled_by[name].second;
    }
    if (r.lossless) { ++compared_n; lossless_n += *r.lossless ? 1 : 0; }
    tps_sum += r.decode_tps();
    wall_tps_sum += r.wall_tps();
    total.Add(r.stats);
  }
  json Mean(double sum, int64_t k) const { return k ? json(sum / k) : json(nullptr); }
  json Lossless() const { return compared_n ? json(static_cast<double>(lossless_n) / compared_n) : json(nullptr); }

  json Short() const {
    return {{"n", n},
            {"speedup", Mean(speedup_sum, speedup_n)},
            {"e2e_speedup", Mean(e2e_sum, e2e_n)},
            {"modelled_speedup", Mean(modelled_sum, modelled_n)},
            {"tokens_per_s", Mean(tps_sum, n)},
            {"tau", Div(total.n_generated, total.n_passes)},
            {"acceptance", Div(total.n_accepted, total.n_drafted + total.n_grafted)},
            {"lossless_rate", Lossless()},
            {"errors", errors}};
  }
  json Full() const {
    json j = Short();
    j["speedup_ci95"] = MeanInterval(speedups);
    j["wall_tokens_per_s"] = Mean(wall_tps_sum, n);
    j["nodes_per_pass"] = Div(total.nodes_verified, total.n_passes);
    j["oracle_fraction"] = Mean(oracle_sum, oracle_n);
    j["new_tokens"] = Div(total.n_generated, n);
    j["passes"] = total.n_passes;
    j["drafted"] = total.n_drafted;
    j["grafted"] = total.n_grafted;
    j["accepted"] = total.n_accepted;
    j["prefill_ms"] = Div(total.t_prefill_ms, n);
    j["ms_per_pass"] = {{"draft", Div(total.t_draft_ms, total.n_passes)}, {"retrieve", Div(total.t_retrieve_ms, total.n_passes)},
                        {"graft", Div(total.t_graft_ms, total.n_passes)}, {"verify", Div(total.t_verify_ms, total.n_passes)},
                        {"commit", Div(total.t_commit_ms, total.n_passes)}};
    j["per_source"] = PerSourceJson(total);
    j["draft_passes"] = total.n_draft_passes;
    j["draft_passes_per_step"] = Div(static_cast<double>(total.n_draft_passes), total.n_passes);
    json by = json::object();
    for (const auto& [name, sum] : modelled_by) by[name] = Mean(sum.first, sum.second);
    j["modelled_by"] = by;
    return j;
  }
};

std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Num(double v, int prec = 3) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", prec, v);
  return buf;
}

std::string OptNum(const std::optional<double>& v, int prec = 4) { return v ? Num(*v, prec) : ""; }

// "1.52x (2.31)" from a summary entry; "-" when there is no speedup.
std::string Cell(const json& e) {
  if (!e.contains("speedup") || e["speedup"].is_null()) return "-";
  return Num(e["speedup"].get<double>(), 2) + "x (" + Num(e["tau"].get<double>(), 2) + ")";
}

std::string Pct(const json& v) { return v.is_null() ? "-" : Num(100.0 * v.get<double>(), 1) + "%"; }

// " The cost profile (measured D) priced 2, 3 and 4 rows at ...x one row; a row read ..."
// from results.json's "profile" (graft's trees are sized by these ratios; they move
// between tunes on a drifting machine, so runs are compared on the profile they had).
std::string ProfileSentence(const json& p) {
  const json v = p.value("verify_ms", json::array());
  if (!v.is_array() || v.size() < 3 || !v[1].is_number() || v[1].get<double>() <= 0) return "";
  const size_t end = std::min<size_t>(v.size(), 5);  // rows 2..4: what most steps verify
  std::string sizes, ratios;
  for (size_t n = 2; n < end; ++n) {
    if (!v[n].is_number()) return "";
    const char* sep = n == 2 ? "" : n + 1 == end ? " and " : ", ";
    sizes += sep + std::to_string(n);
    ratios += sep + Num(v[n].get<double>() / v[1].get<double>(), 2) + "x";
  }
  std::string out = " The cost profile (measured " + p.value("measured_at", std::string("?")) + ") priced " +
                    sizes + " rows at " + ratios + " one row (" + Num(v[1].get<double>(), 1) + " ms)";
  const double read = p.value("read_row_ms", 0.0);
  if (read > 0) out += ", and each row a lazy pass reads after its root at " + Num(read, 2) + " ms";
  return out + ".";
}

// " By it, a proposer that is always right ..." (ProfileCeiling): what none of graft's
// methods can beat on this machine, at the run's largest budget within the measured sizes.
std::string CeilingSentence(const json& p, int32_t budget) {
  CostProfile profile;
  try {
    profile = CostProfileFromJson(p);
  } catch (const std::exception&) {
    return "";
  }
  const Ceiling c = ProfileCeiling(profile, budget);
  if (c.speedup <= 0) return "";
  return " By it, a proposer that is always right would gain at most " + Num(c.speedup, 2) + "x over ar (modelled: " +
         "chains of " + std::to_string(c.rows) + " rows, their reads included, in trees of up to " +
         std::to_string(c.max_n) + " rows): the ceiling of graft's methods, the oracle's included, on this machine.";
}

}  // namespace

std::string TempKey(float t) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", static_cast<double>(t));
  return buf;
}

json RowJson(const BenchRow& r) {
  json j = StatsToJson(r.stats, r.config.method);
  j["method"] = r.config.Label();
  j.update({{"prompt_index", r.prompt_index},
            {"prompt_id", r.prompt_id},
            {"category", r.category},
            {"config", r.config.Name()},
            {"budget", r.config.budget},
            {"temperature", std::stod(TempKey(r.config.temperature))},
            {"rep", r.rep},
            {"turns", r.turns},
            {"truncated", r.truncated},
            {"wall_ms", r.wall_ms},
            {"tokens_per_s", r.decode_tps()},
            {"wall_tokens_per_s", r.wall_tps()},
            {"lossless", r.lossless ? json(*r.lossless) : json(nullptr)},
            {"first_divergence", r.first_divergence},
            {"speedup", Opt(r.speedup)},
            {"e2e_speedup", Opt(r.e2e_speedup)},
            {"oracle_fraction", Opt(r.oracle_fraction)},
            {"modelled_speedup", Opt(r.modelled_speedup)}});
  // Passes by rows, so a run can be priced on another machine's profile later.
  j["pass_rows"] = r.stats.pass_rows;
  j["draft_pass_rows"] = r.stats.draft_pass_rows;
  j["read_products"] = r.stats.read_products;
  j["pass_context"] = r.stats.pass_context;
  j["pass_row_context"] = r.stats.pass_row_context;
  if (!r.modelled_by.empty()) j["modelled_by"] = r.modelled_by;
  if (!r.text.empty()) j["output"] = r.text;
  // --save-outputs: the tokens, so retrieval can be replayed offline (bench/replay_retrieval).
  if (!r.prompts.empty()) {
    j["prompt_tokens"] = r.prompts;
    j["output_tokens"] = r.outputs;
  }
  if (r.config.is_peer()) {
    j["peer"] = true;
    j["error"] = r.error.empty() ? json(nullptr) : json(r.error);
  }
  return j;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// ar's ms per target pass across its rows (see "steadiness" in report.h).
json Steadiness(const std::vector<BenchRow>& rows) {
  std::vector<double> ms, priced;
  for (const BenchRow& r : rows) {
    if (r.config.method == Method::kAr && !r.config.is_peer() && r.error.empty() && r.stats.n_passes > 0) {
      ms.push_back(r.stats.t_verify_ms / r.stats.n_passes);
      if (r.modelled_ms && *r.modelled_ms > 0) priced.push_back(r.stats.t_verify_ms / *r.modelled_ms);
    }
  }
  if (ms.empty()) return nullptr;
  std::sort(ms.begin(), ms.end());
  const double spread = Div(ms.back(), ms.front());
  return {{"n", ms.size()},
          {"min", ms.front()},
          {"median", Median(ms)},
          {"max", ms.back()},
          {"spread", spread},
          {"steady", spread <= kSteadySpread},
          {"of_profile", priced.empty() ? json(nullptr) : json(Median(priced))}};
}

json Summarize(const std::vector<BenchRow>& rows, const std::vector<BenchConfig>& configs,
               const std::vector<std::string>& categories) {
  json by_temp = json::object();
  std::vector<std::string> temp_order;
  for (const BenchConfig& c : configs) {
    const std::string tk = TempKey(c.temperature);
    if (std::find(temp_order.begin(), temp_order.end(), tk) == temp_order.end()) temp_order.push_back(tk);
    Agg all;
    std::map<std::string, Agg> per_cat;
    for (const BenchRow& r : rows) {
      if (r.config.method != c.method || r.config.budget != c.budget || r.config.temperature != c.temperature ||
          r.config.peer != c.peer) {
        continue;
      }
      all.Add(r);
      per_cat[r.category].Add(r);
    }
    json e = all.Full();
    e["config"] = c.Name();
    e["method"] = c.Label();
    e["peer"] = c.is_peer();
    e["budget"] = c.budget;
    e["temperature"] = std::stod(TempKey(c.temperature));
    json cats = json::object();
    for (const std::string& cat : categories) {
      if (per_cat.count(cat)) cats[cat] = per_cat[cat].Short();
    }
    e["categories"] = cats;
    by_temp[tk][c.Name()] = e;
  }
  // "<method>" = the method's best budget by overall speedup (first listed on ties).
  for (auto& [tk, table] : by_temp.items()) {
    std::map<std::string, json> best;
    for (const BenchConfig& c : configs) {
      if (c.method == Method::kAr || c.is_peer() || TempKey(c.temperature) != tk) continue;
      const json& e = table[c.Name()];
      const std::string m = MethodName(c.method);
      auto score = [](const json& x) { return x["speedup"].is_null() ? -1.0 : x["speedup"].get<double>(); };
      if (!best.count(m) || score(e) > score(best[m])) best[m] = e;
    }
    for (auto& [m, e] : best) table[m] = e;
  }
  json out;
  out["summary_by_temp"] = by_temp;
  out["summary"] = temp_order.empty() ? json::object() : by_temp[temp_order.front()];
  out["steadiness"] = Steadiness(rows);
  return out;
}

std::string CsvText(const std::vector<BenchRow>& rows) {
  std::ostringstream os;
  os << "prompt_index,prompt_id,category,config,method,budget,temperature,rep,turns,truncated,prompt_tokens,"
        "new_tokens,wall_ms,tokens_per_s,wall_tokens_per_s,speedup,e2e_speedup,target_passes,draft_passes,tau,"
        "nodes_verified,drafted,grafted,accepted,acceptance";
  for (int i = 1; i < kNumSources; ++i) {
    const std::string n(SourceName(static_cast<Source>(i)));
    os << "," << n << "_proposed," << n << "_accepted";
  }
  os << ",ms_prefill,ms_draft,ms_retrieve,ms_graft,ms_verify,ms_commit,ms_decode,stop_reason,lossless,"
        "first_divergence,oracle_fraction,error,modelled_speedup\n";
  for (const BenchRow& r : rows) {
    const GenerationStats& s = r.stats;
    os << r.prompt_index << "," << Csv(r.prompt_id) << "," << Csv(r.category) << "," << r.config.Name() << ","
       << r.config.Label() << "," << r.config.budget << "," << TempKey(r.config.temperature) << ","
       << r.rep << "," << r.turns << "," << (r.truncated ? 1 : 0) << "," << s.n_prompt << "," << s.n_generated
       << "," << Num(r.wall_ms) << "," << Num(r.decode_tps()) << "," << Num(r.wall_tps()) << ","
       << OptNum(r.speedup) << "," << OptNum(r.e2e_speedup) << "," << s.n_passes << "," << s.n_draft_passes << ","
       << Num(s.tau(), 4) << "," << s.nodes_verified << "," << s.n_drafted << "," << s.n_grafted << ","
       << s.n_accepted << "," << Num(s.acceptance(), 4);
    for (int i = 1; i < kNumSources; ++i) os << "," << s.per_source[i].proposed << "," << s.per_source[i].accepted;
    os << "," << Num(s.t_prefill_ms) << "," << Num(s.t_draft_ms) << "," << Num(s.t_retrieve_ms) << ","
       << Num(s.t_graft_ms) << "," << Num(s.t_verify_ms) << "," << Num(s.t_commit_ms) << "," << Num(s.t_decode_ms)
       << "," << s.stop_reason << "," << (r.lossless ? (*r.lossless ? "1" : "0") : "") << "," << r.first_divergence
       << "," << OptNum(r.oracle_fraction) << "," << Csv(r.error) << "," << OptNum(r.modelled_speedup) << "\n";
  }
  return os.str();
}

json FixedBudgetJson(const json& summary_by_temp, const std::vector<BenchConfig>& configs,
                     const std::vector<std::string>& model_profiles) {
  json rows = json::array(), claims = json::array();
  auto number = [](const json& e, const char* k) { return e.contains(k) && e[k].is_number() ? e[k].get<double>() : 0.0; };
  std::vector<std::string> temps;
  for (const BenchConfig& c : configs) {
    const std::string tk = TempKey(c.temperature);
    if (c.is_peer() || !summary_by_temp.contains(tk) || !summary_by_temp[tk].contains(c.Name())) continue;
    if (std::find(temps.begin(), temps.end(), tk) == temps.end()) temps.push_back(tk);
    const json& e = summary_by_temp[tk][c.Name()];
    json modelled = json::object();
    for (const std::string& p : model_profiles) {
      const json by = e.value("modelled_by", json::object());
      modelled[p] = by.contains(p) ? by[p] : json(nullptr);
    }
    rows.push_back({{"temperature", std::stod(tk)},
                    {"config", c.Name()},
                    {"method", c.Label()},
                    {"budget", c.budget},
                    {"n", e.value("n", 0)},
                    {"tau", number(e, "tau")},
                    {"nodes_per_pass", number(e, "nodes_per_pass")},
                    {"draft_passes_per_step", number(e, "draft_passes_per_step")},
                    {"per_source", e.value("per_source", json::object())},
                    {"speedup", e.value("speedup", json())},
                    {"modelled", modelled}});
  }
  // The claim, at every budget where both graft and the dense tree verified something.
  for (const std::string& tk : temps) {
    const json& table = summary_by_temp[tk];
    std::vector<int32_t> budgets;
    for (const BenchConfig& c : configs) {
      if (c.method == Method::kGraft && !c.is_peer() && TempKey(c.temperature) == tk &&
          std::find(budgets.begin(), budgets.end(), c.budget) == budgets.end()) {
        budgets.push_back(c.budget);
      }
    }
    for (int32_t b : budgets) {
      const std::string g = "graft@" + std::to_string(b), t = "tree@" + std::to_string(b);
      if (!table.contains(g) || !table.contains(t)) continue;
      const double gt = number(table[g], "tau"), tt = number(table[t], "tau");
      const double gn = number(table[g], "nodes_per_pass"), tn = number(table[t], "nodes_per_pass");
      if (gt <= 0 || tt <= 0 || gn <= 0 || tn <= 0) continue;  // no passes to compare
      json c = {{"temperature", std::stod(tk)}, {"budget", b},          {"graft_tau", gt},
                {"tree_tau", tt},               {"graft_nodes_per_pass", gn}, {"tree_nodes_per_pass", tn},
                {"nodes_share", gn / tn},       {"tau_holds", gt >= tt},  {"nodes_holds", gn / tn <= kClaimNodeShare}};
      c["holds"] = c["tau_holds"].get<bool>() && c["nodes_holds"].get<bool>();
      c["sentence"] = ClaimSentence(c);
      claims.push_back(std::move(c));
    }
  }
  return {{"model_profiles", model_profiles}, {"rows", rows}, {"claims", claims}};
}

std::string ClaimSentence(const json& c) {
  const bool tau = c["tau_holds"].get<bool>(), nodes = c["nodes_holds"].get<bool>();
  std::string s = "N=" + std::to_string(c["budget"].get<int32_t>()) + ": graft's tau " +
                  Num(c["graft_tau"].get<double>(), 2) + " against tree's " + Num(c["tree_tau"].get<double>(), 2) +
                  ", with " + Num(100.0 * c["nodes_share"].get<double>(), 1) + "% of tree's verified nodes per pass (" +
                  Num(c["graft_nodes_per_pass"].get<double>(), 1) + " against " +
                  Num(c["tree_nodes_per_pass"].get<double>(), 1) + "): ";
  if (tau && nodes) return s + "the claim holds.";
  s += "the claim does not hold (";
  if (!tau) s += "graft's tau is below tree's";
  if (!tau && !nodes) s += ", and ";
  if (!nodes) s += "graft verified more than " + Num(100.0 * kClaimNodeShare, 0) + "% of tree's nodes";
  return s + ").";
}

namespace {

// results.md's fixed-budget section from results.json's "fixed_budget" (and "profile",
// to say what the rows-free column priced a pass at).
std::string FixedBudgetMarkdown(const json& res) {
  const json& fb = res["fixed_budget"];
  const std::vector<std::string> profiles = fb.value("model_profiles", std::vector<std::string>{});
  std::ostringstream os;
  os << "\n## Fixed budget (the paper's table)\n\n"
        "The policy off (`--fixed-budget`): every speculative method, graft included, drafts at every step and "
        "verifies up to N nodes a pass; ar is the baseline. tau = new tokens per target pass; nodes/pass = tree "
        "nodes the target verified per pass, roots included; draft passes/step = draft-model passes per target "
        "pass; acceptance per source = accepted / proposed nodes of each source that proposed any; speedup = "
        "the clock's (decode tokens/s over ar's).";
  const json profile = res.value("profile", json());
  const json v = profile.is_object() ? profile.value("verify_ms", json::array()) : json::array();
  const json d = profile.is_object() ? profile.value("draft_ms", json::array()) : json::array();
  for (const std::string& p : profiles) {
    if (p == "measured") {
      os << " **modelled (measured)**: the same ratio with every pass priced by this machine's cost profile";
      int32_t budget = 0;
      for (const json& r : fb["rows"]) budget = std::max(budget, r.value("budget", 0));
      if (v.is_array() && v.size() >= 2 && budget > static_cast<int32_t>(v.size()) - 1) {
        os << " (measured up to " << v.size() - 1 << " rows; larger passes priced by extending its last slope)";
      }
      os << ".";
    } else if (p == "rows-free") {
      os << " **modelled (rows-free)**: a stand-in for a GPU, where a pass costs about the same whatever its rows: "
            "every target pass priced at this machine's 1-row pass";
      if (v.is_array() && v.size() >= 2 && v[1].is_number() && v[1].get<double>() > 0) {
        os << " (" << Num(v[1].get<double>(), 1) << " ms)";
        if (d.is_array() && d.size() >= 2 && d[1].is_number()) {
          os << ", every draft pass at the draft's 1-row pass (" << Num(d[1].get<double>(), 1) << " ms, "
             << Num(d[1].get<double>() / v[1].get<double>(), 2) << "x a target pass)";
        }
      } else {
        os << ", every draft pass at the draft's";
      }
      os << ", a row's logits read for nothing.";
    }
  }
  if (!profiles.empty()) os << " Modelled columns are computed from the run's pass counts, not measured.";
  os << "\n";
  std::vector<double> temps;
  for (const json& r : fb["rows"]) {
    const double t = r["temperature"].get<double>();
    if (std::find(temps.begin(), temps.end(), t) == temps.end()) temps.push_back(t);
  }
  for (double t : temps) {
    os << "\n### Fixed budget, temperature " << TempKey(static_cast<float>(t)) << "\n\n"
       << "| Method | N | prompts | tau | nodes/pass | draft passes/step | acceptance per source | speedup (clock) |";
    for (const std::string& p : profiles) os << " modelled (" << p << ") |";
    os << "\n|---|---|---|---|---|---|---|---|";
    for (size_t i = 0; i < profiles.size(); ++i) os << "---|";
    os << "\n";
    for (const json& r : fb["rows"]) {
      if (r["temperature"].get<double>() != t) continue;
      std::string sources;
      for (auto& [name, c] : r["per_source"].items()) {
        sources += (sources.empty() ? "" : ", ") + name + " " + Pct(c["acceptance"]) + " (" +
                   std::to_string(c["accepted"].get<int64_t>()) + "/" + std::to_string(c["proposed"].get<int64_t>()) +
                   ")";
      }
      const bool ar = r["method"] == "ar";
      auto x = [](const json& j) { return j.is_number() ? Num(j.get<double>(), 2) + "x" : std::string("-"); };
      os << "| " << r["method"].get<std::string>() << " | " << (ar ? "-" : std::to_string(r["budget"].get<int32_t>()))
         << " | " << r["n"].get<int64_t>() << " | " << Num(r["tau"].get<double>(), 2) << " | "
         << Num(r["nodes_per_pass"].get<double>(), 1) << " | " << Num(r["draft_passes_per_step"].get<double>(), 2)
         << " | " << (sources.empty() ? "-" : sources) << " | " << x(r["speedup"]) << " |";
      for (const std::string& p : profiles) os << " " << x(r["modelled"].value(p, json())) << " |";
      os << "\n";
    }
    bool first = true;
    for (const json& c : fb["claims"]) {
      if (c["temperature"].get<double>() != t) continue;
      if (first) {
        os << "\nThe paper's claim: at the same budget graft's tau is at least the dense tree's, with at most "
           << Num(100.0 * kClaimNodeShare, 0) << "% of its verified nodes per pass.\n\n";
        first = false;
      }
      os << "- " << c["sentence"].get<std::string>() << "\n";
    }
    if (first) os << "\n(No claim to check: it needs both graft and tree in --methods.)\n";
  }
  return os.str();
}

}  // namespace

std::string MarkdownText(const json& res, const std::vector<std::string>& categories) {
  std::ostringstream os;
  os << "# graft bench\n\n";
  const json& st = res["status"];
  os << "- status: " << st.value("state", "?") << ", "
     << st.value("prompts_done", 0) << "/" << st.value("prompts_total", 0) << " prompts";
  if (st.contains("skipped")) {
    size_t duplicates = 0;
    for (const json& s : st["skipped"]) duplicates += s.value("reason", "") == "duplicate" ? 1 : 0;
    if (st["skipped"].size() > duplicates) os << ", " << st["skipped"].size() - duplicates << " skipped (too long)";
    if (duplicates > 0) os << ", " << duplicates << " skipped (the same as an earlier one once cut)";
  }
  os << "\n";
  if (res.contains("date")) os << "- date: " << res["date"].get<std::string>() << "\n";
  if (res.contains("dataset")) {
    const json& d = res["dataset"];
    os << "- dataset: " << d.value("name", "?") << " (" << d.value("n_prompts", 0) << " prompts";
    if (d.value("per_category", 0) > 0) os << ", " << d["per_category"].get<int>() << " per category";
    os << ")\n";
  }
  if (res.contains("error")) os << "- error: " << res["error"].get<std::string>() << "\n";
  if (res.contains("elapsed_s") && res["elapsed_s"].is_number()) {
    const double sec = res["elapsed_s"].get<double>();
    os << "- took: " << Num(sec / 60.0, 1) << " min (" << Num(sec, 0)
       << " s wall clock, the whole command: model loading and cost profile included)\n";
  }
  if (res.contains("models")) {
    for (auto& [role, m] : res["models"].items()) {
      os << "- " << role << ": " << m.value("path", "") << " (" << m.value("description", "") << ")\n";
    }
  }
  if (res.contains("machine")) {
    os << "- machine: " << res["machine"].value("cpu", "?") << ", " << res["machine"].value("cores", 0)
       << " cores\n";
  }
  if (res.contains("llama_cpp")) os << "- llama.cpp: " << res["llama_cpp"].get<std::string>() << "\n";
  if (res.contains("flags")) {
    const json& f = res["flags"];
    os << "- n_predict " << f.value("n_predict", 0) << ", reps " << f.value("reps", 1) << ", warm-up "
       << (f.value("warmup", false) ? "yes" : "no") << "\n";
  }
  os << "\nSpeedup = mean over prompts of (decode tokens/s) / (ar's decode tokens/s), prefill excluded; "
        "e2e speedup = mean of (ar's prefill + its decode time for as many tokens) / (wall time, prefill included); "
        "tau = new tokens per target pass; 95% CI = the 95% interval of the speedup's mean over its rows "
        "(Student's t): it holds the machine's noise and the prompts' variety, and a run whose interval "
        "straddles 1.00x has not shown a gain or a loss. Each configuration runs on its own engine, interleaved per prompt. "
        "Modelled speedup = the same ratio with the clock replaced by the cached cost profile: each target or "
        "draft pass priced at the profile's ms for its rows, so the machine's noise is out of it (the rest of a "
        "step, retrieval, grafting, verification and commit, is left out).\n";
  if (res.contains("steadiness") && res["steadiness"].is_object()) {
    const json& s = res["steadiness"];
    os << "\nar's target pass took " << Num(s["median"].get<double>(), 1) << " ms (median; "
       << Num(s["min"].get<double>(), 1) << "-" << Num(s["max"].get<double>(), 1) << " over its "
       << s["n"].get<int64_t>() << " rows).";
    if (!s["steady"].get<bool>()) {
      os << " **The machine was not steady**: the same work took " << Num(s["spread"].get<double>(), 2)
         << "x as long on ar's slowest prompt as on its fastest, so single-prompt ratios carry that noise; "
            "compare categories, rerun on a quiet machine or with more --reps.";
    }
    if (s.contains("of_profile") && s["of_profile"].is_number()) {
      const double of = s["of_profile"].get<double>();
      os << " They ran at " << Num(of, 2) << "x the cost profile's price (median over ar's rows).";
      if (of < kProfileMatch.first || of > kProfileMatch.second) {
        os << " **The cost profile does not match this run**: graft sizes its trees by the profile's ratios; if "
              "only the 1-row pass ran at another speed than when the profile was measured (not the whole "
              "machine), every extra row was priced "
           << (of < 1 ? "cheaper" : "dearer")
           << " than it was. `graft tune` measures the profile again (on a quiet machine).";
      }
    }
    if (res.contains("profile") && res["profile"].is_object()) {
      int32_t budget = 0;
      for (const json& c : res["configs"]) {
        if (!c.value("peer", false)) budget = std::max(budget, c.value("budget", 0));
      }
      os << ProfileSentence(res["profile"]) << CeilingSentence(res["profile"], budget);
    }
    os << "\n";
  }

  bool any_peer = false;
  for (const json& c : res["configs"]) any_peer = any_peer || c.value("peer", false);
  if (any_peer) {
    os << "\nRows named llama-* are llama.cpp's own tools (`graft bench --peers`), built from the same pinned "
          "source as graft's backend, given the same prompt tokens, greedy; their times are the tools' own "
          "reports (prefill and decode, model load excluded); lossless = the output text equals ar's.\n\n";
    for (const PeerSpec& p : AllPeers()) {
      for (const json& c : res["configs"]) {
        if (c["name"] != p.name) continue;
        os << "- " << p.name << ": " << p.about << "\n";
        break;
      }
    }
    std::map<std::string, std::pair<int, std::string>> failed;  // peer -> (rows, first error)
    for (const json& r : res["rows"]) {
      if (!r.contains("error") || r["error"].is_null()) continue;
      auto& f = failed[r["config"].get<std::string>()];
      if (f.first++ == 0) f.second = r["prompt_id"].get<std::string>() + ": " + r["error"].get<std::string>();
    }
    for (const auto& [name, f] : failed) {
      os << "- **" << name << " failed on " << f.first << " prompt(s)** (not in its figures), first: " << f.second
         << "\n";
    }
  }
  for (auto& [tk, table] : res["summary_by_temp"].items()) {
    // A table of one figure: rows = configurations at this temperature, columns =
    // categories + overall.
    auto category_table = [&](const std::string& title, bool peers, const std::function<std::string(const json&)>& cell) {
      os << "\n" << title << ", temperature " << tk << "\n\n| Method |";
      for (const auto& c : categories) os << " " << c << " |";
      os << " Overall |\n|---|";
      for (size_t i = 0; i <= categories.size(); ++i) os << "---|";
      os << "\n";
      for (const json& c : res["configs"]) {
        if (TempKey(c["temperature"].get<double>()) != tk || (!peers && c.value("peer", false))) continue;
        const json& e = table[c["name"].get<std::string>()];
        os << "| " << c["name"].get<std::string>() << " |";
        for (const auto& cat : categories) os << " " << (e["categories"].contains(cat) ? cell(e["categories"][cat]) : "-") << " |";
        os << " " << cell(e) << " |\n";
      }
    };
    category_table("## Speedup (tau)", true, Cell);
    // The same ratios with every pass priced by the cost profile (our methods; the ar
    // entry has one whenever any row has).
    if (table.contains("ar") && !table["ar"].value("modelled_speedup", json()).is_null()) {
      category_table("### Modelled speedup (every pass priced by the cost profile)", false, [](const json& x) {
        const json m = x.value("modelled_speedup", json());
        return m.is_null() ? std::string("-") : Num(m.get<double>(), 2) + "x";
      });
    }
    os << "\n### Statistics, temperature " << tk << "\n\n"
       << "| Method | tokens/s | speedup | 95% CI | e2e speedup | tau | acceptance | nodes/pass | lossless | oracle frac. "
          "| ms/pass draft | retrieve | graft | verify | commit | prefill ms |\n"
       << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const json& c : res["configs"]) {
      if (TempKey(c["temperature"].get<double>()) != tk) continue;
      const json& e = table[c["name"].get<std::string>()];
      auto n = [&](const char* k, int p) { return e[k].is_null() ? std::string("-") : Num(e[k].get<double>(), p); };
      const json& ms = e["ms_per_pass"];
      const json ci = e.value("speedup_ci95", json());
      const std::string interval =
          ci.is_array() ? Num(ci[0].get<double>(), 2) + "-" + Num(ci[1].get<double>(), 2) : std::string("-");
      os << "| " << c["name"].get<std::string>() << " | " << n("tokens_per_s", 1) << " | " << n("speedup", 2)
         << " | " << interval << " | " << n("e2e_speedup", 2) << " | " << n("tau", 2) << " | " << Pct(e["acceptance"]) << " | "
         << n("nodes_per_pass", 1) << " | " << Pct(e["lossless_rate"]) << " | " << Pct(e["oracle_fraction"])
         << " | " << Num(ms["draft"].get<double>(), 1) << " | " << Num(ms["retrieve"].get<double>(), 2) << " | "
         << Num(ms["graft"].get<double>(), 2) << " | " << Num(ms["verify"].get<double>(), 1) << " | "
         << Num(ms["commit"].get<double>(), 2) << " | " << n("prefill_ms", 0) << " |\n";
    }
    os << "\n### Acceptance per source (accepted / proposed), temperature " << tk << "\n\n| Method |";
    std::vector<std::string> srcs;
    for (int i = 1; i < kNumSources; ++i) srcs.emplace_back(SourceName(static_cast<Source>(i)));
    for (const auto& s : srcs) os << " " << s << " |";
    os << "\n|---|";
    for (size_t i = 0; i < srcs.size(); ++i) os << "---|";
    os << "\n";
    for (const json& c : res["configs"]) {
      if (TempKey(c["temperature"].get<double>()) != tk || c["method"] == "ar") continue;
      const json& ps = table[c["name"].get<std::string>()]["per_source"];
      os << "| " << c["name"].get<std::string>() << " |";
      for (const auto& s : srcs) {
        if (!ps.contains(s)) { os << " - |"; continue; }
        os << " " << Pct(ps[s]["acceptance"]) << " (" << ps[s]["accepted"].get<int64_t>() << "/"
           << ps[s]["proposed"].get<int64_t>() << ") |";
      }
      os << "\n";
    }
  }
  if (res.contains("fixed_budget") && res["fixed_budget"].is_object()) os << FixedBudgetMarkdown(res);
  return os.str();
}

json ResultsJson(const ReportInput& in) {
  json j = in.meta.is_object() ? in.meta : json::object();
  j["schema"] = "graft-bench/1";
  json skipped = json::array();
  for (const auto& s : in.status->skipped) {
    json e = {{"prompt_id", s.prompt_id}, {"category", s.category}, {"prompt_tokens", s.tokens}, {"cap", s.cap},
              {"reason", s.same_as.empty() ? "too long" : "duplicate"}};
    if (!s.same_as.empty()) e["same_as"] = s.same_as;
    skipped.push_back(std::move(e));
  }
  const bool complete = !in.status->interrupted && in.status->prompts_done == in.status->prompts_total;
  j["status"] = {{"state", complete ? "complete" : in.status->interrupted ? "interrupted" : "running"},
                 {"complete", complete},
                 {"interrupted", in.status->interrupted},
                 {"prompts_done", in.status->prompts_done},
                 {"prompts_total", in.status->prompts_total},
                 {"skipped", skipped}};
  json cfgs = json::array();
  for (const BenchConfig& c : *in.configs) {
    cfgs.push_back({{"name", c.Name()}, {"method", c.Label()}, {"budget", c.budget},
                    {"temperature", std::stod(TempKey(c.temperature))}, {"peer", c.is_peer()}});
  }
  j["configs"] = cfgs;
  j["categories"] = *in.categories;
  json sum = Summarize(*in.rows, *in.configs, *in.categories);
  j["summary"] = sum["summary"];
  j["summary_by_temp"] = sum["summary_by_temp"];
  j["steadiness"] = sum["steadiness"];
  if (in.fixed_budget) j["fixed_budget"] = FixedBudgetJson(sum["summary_by_temp"], *in.configs, in.model_profiles);
  json rows = json::array();
  for (const BenchRow& r : *in.rows) rows.push_back(RowJson(r));
  j["rows"] = rows;
  return j;
}

json WriteResults(const std::string& dir, const ReportInput& in) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create output directory " + dir + ": " + ec.message());
  json j = ResultsJson(in);
  WriteFileAtomic((fs::path(dir) / "results.json").string(), j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  WriteFileAtomic((fs::path(dir) / "results.csv").string(), CsvText(*in.rows));
  WriteFileAtomic((fs::path(dir) / "results.md").string(), MarkdownText(j, *in.categories));
  return j;
}

}  // namespace graft::bench
