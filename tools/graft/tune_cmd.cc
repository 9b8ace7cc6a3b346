// graft tune: measure this machine's cost profile (a target pass over N = 1..32 rows,
// a draft pass over 1..8) and cache it, so that graft's decisions are the same on
// every later run. `graft generate` measures it on first use when none is cached;
// `graft tune --if-missing` (the Quick start's set-up) measures only then.
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_options.h"
#include "commands.h"
#include "engine/cost_model.h"
#include "graft/cost_profile.h"

namespace graft::cli {
namespace {

struct TuneFlags {
  ModelFlags models;
  int32_t max_rows = 32;
  int32_t max_draft_rows = 8;
  int32_t repeats = 3;
  int32_t prefix = CostProfileOptions{}.prefix;
  int32_t long_prefix = CostProfileOptions{}.long_prefix;
  bool json = false;
  bool if_missing = false;
};

int RunTune(const TuneFlags& f) {
  LoadedModels m = LoadModelFiles(f.models);
  CostProfileOptions o;
  o.n_threads = f.models.threads;
  o.max_rows = f.max_rows;
  o.max_draft_rows = f.max_draft_rows;
  o.repeats = f.repeats;
  o.prefix = f.prefix;
  o.long_prefix = f.long_prefix;
  o.dir = f.models.profile_dir;
  o.lazy_logits = !f.models.no_lazy_logits;
  CostProfile p;
  if (f.if_missing) {
    double measured_ms = 0;
    fprintf(stderr, "loading the cost profile, or measuring passes over 1..%d rows if none is cached...\n",
            o.max_rows);
    p = LoadOrMeasureCostProfile(*m.target, m.draft.get(), o, &measured_ms);
    if (measured_ms > 0) {
      fprintf(stderr, "measured in %.0f s\n", measured_ms / 1000);
    } else {
      fprintf(stderr, "cached\n");
    }
  } else {
    fprintf(stderr, "measuring passes over 1..%d rows (%d repeats each)...\n", o.max_rows, o.repeats);
    p = MeasureCostProfile(*m.target, m.draft.get(), o);
    SaveCostProfile(p, o);
  }
  const std::string path = CostProfilePath(p.key, o);
  if (f.json) {
    nlohmann::json j = CostProfileJson(p);
    j["path"] = path;
    printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  printf("profile %s\n  %s\n\n", path.c_str(), p.key.c_str());
  const std::string at_long = "at " + std::to_string(p.long_prefix);
  printf("%4s  %10s  %8s  %10s  %8s  %14s  %14s\n", "rows", "target ms", "x 1 row", "draft ms", "x 1 row",
         ("target " + at_long).c_str(), ("draft " + at_long).c_str());
  const auto long_ms = [](const std::vector<double>& v, size_t n) { return n < v.size() && v[n] > 0 ? v[n] : 0.0; };
  for (size_t n = 1; n < p.verify_ms.size(); ++n) {
    printf("%4zu  %10.2f  %8.2f", n, p.verify_ms[n], p.verify_ms[n] / p.verify_ms[1]);
    if (n < p.draft_ms.size()) {
      printf("  %10.2f  %8.2f", p.draft_ms[n], p.draft_ms[n] / p.draft_ms[1]);
    } else {
      printf("  %10s  %8s", "", "");
    }
    if (const double v = long_ms(p.verify_ms_long, n); v > 0) printf("  %14.2f", v); else printf("  %14s", "");
    if (const double v = long_ms(p.draft_ms_long, n); v > 0) printf("  %14.2f", v);
    printf("\n");
  }
  if (p.read_row_ms > 0) {
    printf("\nlazy output layer: each row read after the root %.2f ms", p.read_row_ms);
    if (p.read_ahead_ms > 0) printf(", read ahead with it %.2f ms (mean)", p.read_ahead_ms);
    printf("\n");
    if (p.read_product_ms.size() > 2) {
      printf("one product over the logits of");
      for (size_t c = 1; c < p.read_product_ms.size(); ++c) printf(" %zu row%s %.2f ms%s", c, c == 1 ? "" : "s", p.read_product_ms[c], c + 1 < p.read_product_ms.size() ? "," : "\n");
    }
  }
  // At the default tree budget and at the largest size measured.
  const Ceiling c = ProfileCeiling(p, DecodeOptions{}.tree_budget);
  const Ceiling all = ProfileCeiling(p, std::numeric_limits<int32_t>::max());
  if (c.speedup > 0) {
    printf("\nceiling: with every proposal right, graft's verification would gain at most %.2fx over\n"
           "plain decoding here with trees of up to %d rows (chains of %d, their reads included)",
           c.speedup, c.max_n, c.rows);
    if (all.max_n > c.max_n) printf(", %.2fx up to %d (chains of %d)", all.speedup, all.max_n, all.rows);
    printf("\n");
  }
  return 0;
}

}  // namespace

void AddTuneCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<TuneFlags>();
  CLI::App* cmd = app.add_subcommand("tune", "measure and cache this machine's cost profile (pass cost by rows)");
  flags->models.Add(cmd);
  cmd->add_option("--max-rows", flags->max_rows, "largest target pass measured")->check(CLI::Range(1, 256));
  cmd->add_option("--max-draft-rows", flags->max_draft_rows, "largest draft pass measured")->check(CLI::Range(1, 256));
  cmd->add_option("--repeats", flags->repeats, "passes per size (the median is kept)")->check(CLI::Range(1, 100));
  cmd->add_option("--prefix", flags->prefix, "tokens in the cache when a pass is timed (engines read the profile of the defaults)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--long-prefix", flags->long_prefix,
                  "a longer cache where some sizes are timed too, to price passes by context (0 = none)")
      ->check(CLI::Range(0, 65536));
  cmd->add_flag("--json", flags->json, "print the profile as JSON");
  cmd->add_flag("--if-missing", flags->if_missing,
                "measure only when no profile is cached for these models on this machine (else print the cached one)");
  cmd->callback([flags, run] { *run = [flags] { return RunTune(*flags); }; });
}

}  // namespace graft::cli
