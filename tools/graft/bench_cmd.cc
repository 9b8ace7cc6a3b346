// graft bench: every method (x budget x temperature) over a prompt set, interleaved per
// prompt, with results.json / results.csv / results.md rewritten after each prompt and
// PNG plots at the end (scripts/plot_bench.py). See src/bench/harness.h for the rules.
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/dataset.h"
#include "bench/harness.h"
#include "bench/peers.h"
#include "bench/report.h"
#include "cli_options.h"
#include "commands.h"
#include "graft/error.h"
#include "graft/learned_state.h"
#include "progress.h"

namespace graft::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BenchFlags {
  ModelFlags models;
  DecodeFlags decode;  // knobs only (method, budget and temperature come from the lists)
  bench::DatasetSpec data;
  std::vector<std::string> methods;
  std::vector<std::string> peers;
  std::string peers_dir;
  std::vector<int32_t> budgets = {16};
  std::vector<std::string> model_profiles;  // --model-profile; "" = measured (with --fixed-budget: both)
  std::vector<float> temps = {0.0f};
  int32_t n_predict = 128;
  int32_t reps = 1;
  int32_t max_prompt_tokens = 0;
  std::string long_prompts = "truncate";
  bool warmup = true;
  bool oracle = false;
  bool quick = false;
  bool save_outputs = false;
  bool no_plots = false;
  std::string system;
  bool raw = false;
  std::string out;
  std::string learned_state;  // read-only start of every engine ("" = cold)
  CLI::App* sub = nullptr;  // to ask which flags were given (--quick fills the others)
};

// Set by SIGINT / SIGTERM: the harness stops at the next token and files are finished.
// A second signal more than a second after the first exits at once (files stay as they
// were after the last finished prompt); one within that second is taken as the same
// request (wrappers such as `timeout` forward the terminal's Ctrl-C a second time).
std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;
std::atomic<int64_t> g_first_signal_ns{0};

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void OnSignal(int sig) {
  const int64_t now = MonotonicNs();
  if (!g_stop.load()) {
    g_signal = sig;
    g_first_signal_ns.store(now);
    g_stop.store(true);
    return;
  }
  if (now - g_first_signal_ns.load() > 1000000000) _exit(128 + sig);
}

std::string ReadFirstMatch(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto c = line.find(':');
      if (c == std::string::npos) continue;
      auto v = line.substr(c + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

json MachineInfo() {
  json m;
  m["cpu"] = ReadFirstMatch("/proc/cpuinfo", "model name");
  m["cores"] = std::thread::hardware_concurrency();
  m["memory"] = ReadFirstMatch("/proc/meminfo", "MemTotal");
  utsname u{};
  if (uname(&u) == 0) m["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  return m;
}

json ModelInfo(const Model& m) {
  return {{"path", m.path()}, {"name", m.Name()}, {"description", m.Description()},
          {"size_bytes", m.size_bytes()}, {"n_params", m.n_params()}, {"n_vocab", m.n_vocab()}};
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : all) if (c == '\0') c = ' ';
  while (!all.empty() && all.back() == ' ') all.pop_back();
  return all;
}

std::string UtcNow(const char* fmt) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), fmt, &tm);
  return buf;
}

// The bench's progress detail: "5/21 | [rep 1/2 ]prompt 2/3 code | tree@4".
std::string ProgressDetail(const bench::ProgressEvent& e, int32_t reps) {
  std::string d = std::to_string(e.done) + "/" + std::to_string(e.total) + " | ";
  if (reps > 1) d += "rep " + std::to_string(e.rep + 1) + "/" + std::to_string(reps) + " ";
  return d + "prompt " + std::to_string(e.prompt + 1) + "/" + std::to_string(e.n_prompts) + " " + e.category +
         " | " + e.config;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// Runs scripts/plot_bench.py with the project venv's python when matplotlib imports.
void MakePlots(const std::string& out) {
  const std::string src = bench::SourceDir();
  const std::string script = (fs::path(src) / "scripts" / "plot_bench.py").string();
  std::string py;
  if (const char* p = std::getenv("GRAFT_PYTHON"); p != nullptr && *p != '\0') py = p;
  else if (fs::exists(fs::path(src) / ".venv" / "bin" / "python")) py = (fs::path(src) / ".venv" / "bin" / "python").string();
  else py = "python3";
  const std::string how = "  " + py + " " + script + " " + out;
  if (!fs::exists(script)) {
    fprintf(stderr, "bench: plots skipped (%s not found)\n", script.c_str());
    return;
  }
  if (std::system((ShellQuote(py) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) != 0) {
    fprintf(stderr, "bench: plots skipped: matplotlib is not importable by %s; install it (%s -m pip install "
            "matplotlib) and run:\n%s\n", py.c_str(), py.c_str(), how.c_str());
    return;
  }
  if (std::system((ShellQuote(py) + " " + ShellQuote(script) + " " + ShellQuote(out)).c_str()) != 0) {
    fprintf(stderr, "bench: plotting failed; rerun:\n%s\n", how.c_str());
  }
}

// The peers' names ("all" = every one that the models allow), and their programs built
// by scripts/setup.sh --peers when missing.
std::vector<std::string> PreparePeers(const BenchFlags& f, bool have_draft) {
  std::vector<std::string> names;
  for (const std::string& n : f.peers) {
    if (n == "all") {
      for (const bench::PeerSpec& p : bench::AllPeers()) {
        if (have_draft || !p.needs_draft) names.push_back(p.name);
      }
    } else {
      names.push_back(bench::ParsePeer(n).name);
    }
  }
  if (names.empty()) return names;
  std::vector<bench::PeerSpec> specs;
  for (const std::string& n : names) specs.push_back(bench::ParsePeer(n));
  const bench::PeerRunner runner(f.peers_dir);
  if (runner.Missing(specs).empty()) return names;
  const std::string setup = (fs::path(bench::SourceDir()) / "scripts" / "setup.sh").string();
  if (f.peers_dir != bench::DefaultPeersDir() || !fs::exists(setup)) {
    throw Error("llama.cpp's tools are missing from " + f.peers_dir + " (" + runner.Missing(specs).front() +
                "); build them with scripts/setup.sh --peers");
  }
  fprintf(stderr, "bench: building llama.cpp's tools for --peers (scripts/setup.sh --peers; once, ~15 min)\n");
  if (std::system((ShellQuote(setup) + " --peers 1>&2").c_str()) != 0 || !runner.Missing(specs).empty()) {
    throw Error("scripts/setup.sh --peers failed; llama.cpp's tools are missing from " + f.peers_dir);
  }
  return names;
}

// The methods of the paper's table (--fixed-budget without --methods).
const std::vector<std::string> kFixedBudgetMethods = {"tree", "pruned", "graft", "chain", "suffix"};

// --fixed-budget's own checks and defaults, before any model loads: budgets 8..64 and the
// paper's methods unless given, graft always drafting unless --skip-draft-gain is given,
// both modelled columns unless --model-profile is. Throws graft::Error on bad input.
void PrepareFixedBudget(BenchFlags* f, const std::function<bool(const char*)>& given) {
  if (!f->decode.fixed_budget) {
    if (given("--model-profile")) {
      throw Error("--model-profile prices the fixed-budget table; add --fixed-budget (graft's adaptive trees were "
                  "sized for this machine's profile, so another price would not describe them)");
    }
    return;
  }
  if (!given("--budgets")) f->budgets = {8, 16, 32, 64};
  if (!given("--methods")) f->methods = kFixedBudgetMethods;
  if (!given("--skip-draft-gain")) f->decode.skip_draft_gain = 0;  // "always draft"
  if (f->model_profiles.empty()) f->model_profiles = {"measured", "rows-free"};
  for (const std::string& p : f->model_profiles) bench::ParsePriceProfile(p);  // names the choices
  bool speculative = false;
  for (const std::string& m : f->methods) speculative = speculative || ParseMethod(m) != Method::kAr;
  if (!speculative) {
    throw Error("--fixed-budget needs a speculative method in --methods (ar has no budget; e.g. --methods " +
                std::string("tree,pruned,graft,chain,suffix)"));
  }
}

int RunBench(BenchFlags f) {
  const auto started = std::chrono::steady_clock::now();
  CLI::App* sub = f.sub;
  auto given = [&](const char* flag) { return sub->count(flag) > 0; };
  PrepareFixedBudget(&f, given);
  if (f.quick) {  // explicit flags win over the preset (and over --fixed-budget's)
    if (!given("--per-category")) f.data.per_category = 1;
    if (!given("-n")) f.n_predict = 32;
    if (!given("--methods") && !f.decode.fixed_budget) f.methods = {"ar", "chain", "tree", "pruned", "suffix", "graft"};
    if (!given("--budgets") && !f.decode.fixed_budget) f.budgets = {16};
    if (!given("--max-prompt-tokens")) f.max_prompt_tokens = 512;
  }
  for (int32_t b : f.budgets) {
    if (b < 1 || b > 256) throw Error("--budgets: every budget must be in [1, 256] (got " + std::to_string(b) + ")");
  }
  if (f.long_prompts != "truncate" && f.long_prompts != "skip") {
    throw Error("--long-prompts must be truncate or skip (got '" + f.long_prompts + "')");
  }
  if (f.data.per_category < 0 || f.data.max_prompts < 0) throw Error("--per-category and --max-prompts must be >= 0");
  if (f.max_prompt_tokens < 0) {
    throw Error("--max-prompt-tokens must be >= 0 (0 = what fits -c; got " + std::to_string(f.max_prompt_tokens) + ")");
  }
  if (f.out.empty()) f.out = "bench-" + UtcNow("%Y%m%d-%H%M%S");

  // Dataset first: a malformed file fails before minutes of model loading.
  std::vector<bench::BenchPrompt> prompts = bench::LoadDataset(f.data);
  const std::vector<std::string> categories = bench::CategoryOrder(prompts);

  LoadedModels lm = LoadModels(f.models, 1);
  lm.engine.reset();  // the harness makes one engine per configuration
  if (f.peers_dir.empty()) f.peers_dir = bench::DefaultPeersDir();
  const std::vector<std::string> peers = PreparePeers(f, lm.draft != nullptr);

  bench::HarnessOptions ho;
  if (f.methods.empty()) {  // everything this setup can run
    for (Method m : AllMethods()) {
      if (MethodNeedsDraft(m) && !lm.draft) continue;
      if (m == Method::kRest && f.models.index.empty()) continue;
      ho.methods.push_back(m);
    }
  } else {
    for (const std::string& name : f.methods) {
      const Method m = ParseMethod(name);
      if (f.quick && !given("--methods") && MethodNeedsDraft(m) && !lm.draft) continue;
      ho.methods.push_back(m);
    }
  }
  ho.budgets = f.budgets;
  ho.temperatures = f.temps;
  ho.oracle = f.oracle;
  ho.n_predict = f.n_predict;
  ho.reps = f.reps;
  ho.warmup = f.warmup;
  ho.decode = f.decode.ToOptions(lm.draft != nullptr);  // validates the knobs; --fixed-budget: adaptive off
  if (!f.model_profiles.empty()) {
    ho.price_profiles.clear();
    for (const std::string& p : f.model_profiles) ho.price_profiles.push_back(bench::ParsePriceProfile(p));
  }
  ho.sampling = f.decode.ToSampling();
  ho.n_ctx = f.models.ctx;
  ho.n_threads = f.models.threads;
  ho.lazy_logits = !f.models.no_lazy_logits;
  ho.profile_dir = f.models.profile_dir;
  ho.index_path = f.models.index;
  if (!f.learned_state.empty()) {
    // A benchmark must not silently start cold: the file has to be there and usable.
    if (!LoadLearnedState(f.learned_state, LearnedStateKey(*lm.target, lm.draft.get()))) {
      throw Error("--learned-state " + f.learned_state + ": no such file");
    }
    ho.learned_state = f.learned_state;
  }
  ho.system = f.system;
  ho.raw = f.raw;
  ho.max_prompt_tokens = f.max_prompt_tokens;
  ho.long_prompts = f.long_prompts == "skip" ? bench::LongPromptPolicy::kSkip : bench::LongPromptPolicy::kTruncate;
  ho.keep_outputs = f.save_outputs;
  ho.peers = peers;
  ho.peers_dir = f.peers_dir;
  bench::Harness harness(*lm.target, lm.draft.get(), ho);

  json meta;
  meta["date"] = UtcNow("%Y-%m-%dT%H:%M:%SZ");
  meta["command"] = CommandLine();
  meta["machine"] = MachineInfo();
  meta["models"] = {{"target", ModelInfo(*lm.target)}};
  if (lm.draft) meta["models"]["draft"] = ModelInfo(*lm.draft);
  meta["llama_cpp"] = LlamaBuildInfo();
  meta["dataset"] = {{"name", f.data.dataset}, {"data_dir", f.data.data_dir.empty() ? bench::DefaultDataDir() : f.data.data_dir},
                     {"n_prompts", prompts.size()}, {"per_category", f.data.per_category},
                     {"max_prompts", f.data.max_prompts}};
  std::vector<std::string> mnames;
  for (Method m : harness.options().methods) mnames.push_back(MethodName(m));
  meta["flags"] = {{"methods", mnames}, {"budgets", f.budgets}, {"temps", f.temps}, {"n_predict", f.n_predict},
                   {"reps", f.reps}, {"warmup", f.warmup}, {"oracle", f.oracle}, {"quick", f.quick},
                   {"peers", peers}, {"peers_dir", peers.empty() ? "" : f.peers_dir},
                   {"max_prompt_tokens", f.max_prompt_tokens}, {"long_prompts", f.long_prompts},
                   {"ctx", f.models.ctx}, {"threads", f.models.threads}, {"index", f.models.index},
                   {"system", f.system}, {"raw", f.raw}, {"learned_state", f.learned_state},
                   {"profile_dir", f.models.profile_dir}, {"lazy_logits", !f.models.no_lazy_logits},
                   {"draft_max", f.decode.draft_max}, {"draft_min", f.decode.draft_min},
                   {"draft_p_min", f.decode.draft_p_min}, {"draft_topk", f.decode.draft_topk},
                   {"draft_frontier", f.decode.draft_frontier}, {"prune_p_min", f.decode.prune_p_min},
                   {"max_loss", f.decode.max_loss}, {"loss_grant", f.decode.loss_grant},
                   {"loss_prefill", f.decode.loss_prefill}, {"loss_sure_cap", f.decode.loss_sure_cap},
                   {"top_k", f.decode.top_k}, {"top_p", f.decode.top_p}, {"seed", f.decode.seed},
                   {"fixed_budget", f.decode.fixed_budget}, {"skip_draft_gain", f.decode.skip_draft_gain},
                   {"model_profiles", f.model_profiles}};

  fprintf(stderr, "bench: %zu prompts (%zu categories) x %zu configurations x %d reps -> %s\n", prompts.size(),
          categories.size(), harness.configs().size(), f.reps, f.out.c_str());

  bench::RunStatus last;
  last.prompts_total = static_cast<int32_t>(prompts.size()) * f.reps;  // until the harness knows skips
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  auto write = [&](const std::vector<bench::BenchRow>& rows, const bench::RunStatus& st) {
    if (harness.profile()) meta["profile"] = CostProfileJson(*harness.profile());
    meta["elapsed_s"] = elapsed_s();
    return bench::WriteResults(f.out, {meta, &harness.configs(), &categories, &rows, &st, f.decode.fixed_budget,
                                       f.model_profiles});
  };
  g_stop = false;
  g_signal = 0;
  // Installed for the rest of the process: the command ends right after the run.
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  ProgressBar progress({.prefix = "bench"});  // a line per generation off a terminal
  bench::HarnessCallbacks cb;
  cb.on_progress = [&](const bench::ProgressEvent& e) {
    if (e.warmup) progress.Message("warm-up " + e.config);  // the ETA counts timed generations only
    else progress.Update(e.total ? static_cast<double>(e.done) / e.total : 1.0, ProgressDetail(e, f.reps));
  };
  cb.on_prompt = [&](const std::vector<bench::BenchRow>& rows, const bench::RunStatus& st) {
    last = st;
    write(rows, st);
  };
  bench::RunStatus status;
  try {
    write({}, last);  // the output directory is usable (and writable) from the start
    status = harness.Run(prompts, cb, &g_stop);
  } catch (const std::exception& e) {
    progress.Finish();
    last.interrupted = true;
    meta["error"] = e.what();
    try {
      write(harness.rows(), last);  // keep what finished
    } catch (...) {
    }
    throw;
  }
  progress.Finish();
  const json res = write(harness.rows(), status);
  for (const auto& s : status.skipped) {
    if (!s.same_as.empty()) {
      fprintf(stderr, "bench: skipped prompt %s (%s): cut to %d tokens, it is prompt %s, which ran\n",
              s.prompt_id.c_str(), s.category.c_str(), s.tokens, s.same_as.c_str());
      continue;
    }
    fprintf(stderr, "bench: skipped prompt %s (%s): %d tokens, over the cap of %d\n", s.prompt_id.c_str(),
            s.category.c_str(), s.tokens, s.cap);
  }
  if (status.interrupted) {
    fprintf(stderr, "bench: interrupted; results for %d/%d finished prompts in %s\n", status.prompts_done,
            status.prompts_total, f.out.c_str());
    return g_signal ? 128 + g_signal : 1;
  }
  // The main table on stdout.
  const std::string md = bench::MarkdownText(res, categories);
  const auto a = md.find("## Speedup"), b = md.find("### Statistics");
  if (a != std::string::npos) std::cout << md.substr(a, b == std::string::npos ? std::string::npos : b - a);
  // How steady the machine was, which every ratio above depends on.
  if (const auto c = md.find("ar's target pass took"); c != std::string::npos) {
    std::cout << md.substr(c, md.find('\n', c) - c) << "\n\n";
  }
  // --fixed-budget: the paper's table and its claim.
  if (const auto c = md.find("## Fixed budget"); c != std::string::npos) std::cout << md.substr(c) << "\n";
  char took[64];
  snprintf(took, sizeof(took), "took: %.1f min (the whole command)\n", elapsed_s() / 60.0);
  std::cout << took;
  std::cout << "results: " << f.out << "/results.{json,csv,md}" << std::endl;
  if (!f.no_plots) MakePlots(f.out);
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand("bench", "benchmark every method over a prompt set (Spec-Bench style)");
  flags->sub = sub;
  BenchFlags& f = *flags;
  f.models.Add(sub);
  sub->add_option("--dataset", f.data.dataset, "spec_bench | long | code_edit | code_completion | FILE.jsonl")->capture_default_str();
  sub->add_option("--data-dir", f.data.data_dir,
                  "folder with spec_bench/, long/, code_edit/ (default: $GRAFT_DATA_DIR, else <source>/../shared/data = " +
                      bench::DefaultDataDir() + ")");
  sub->add_option("--prompt-field", f.data.prompt_field, "FILE.jsonl: prompt field (string, or list of turns)")
      ->capture_default_str();
  sub->add_option("--category-field", f.data.category_field,
                  "FILE.jsonl: category field (default: \"category\" when present, else the file name)");
  sub->add_option("--id-field", f.data.id_field, "FILE.jsonl: id field (default: question_id, id or task_id, else the line)");
  sub->add_option("--per-category", f.data.per_category, "first K prompts of each category (0 = all)");
  sub->add_option("--max-prompts", f.data.max_prompts, "at most this many prompts in all, in file order (0 = all)");
  sub->add_option("--methods", f.methods,
                  "comma list of ar, chain, tree, pruned, pld, suffix, rest, recycle, graft (default: every method "
                  "the models allow; ar always runs as the baseline)")
      ->delimiter(',');
  std::string peer_names;
  for (const bench::PeerSpec& p : bench::AllPeers()) peer_names += (peer_names.empty() ? "" : ", ") + p.name;
  sub->add_option("--peers", f.peers,
                  "comma list of llama.cpp's own tools to run beside ours on the same prompts (greedy): " +
                      peer_names + ", or all; built once by scripts/setup.sh --peers (run for you when missing)")
      ->delimiter(',');
  sub->add_option("--peers-dir", f.peers_dir, "where the peers' programs are (default: " + bench::DefaultPeersDir() + ")");
  sub->add_option("--budgets", f.budgets,
                  "comma list of tree budgets N; each method runs once per budget (ar once). Default 16; "
                  "8,16,32,64 with --fixed-budget")
      ->delimiter(',')->capture_default_str();
  sub->add_flag("--fixed-budget", f.decode.fixed_budget,
                "the paper's table: every method with the policy off (graft always drafts and verifies up to the "
                "budget, as tree and pruned do) at each of --budgets; adds a fixed-budget table (tau, verified "
                "nodes per pass, draft passes per step, acceptance per source, clock and modelled speedups, graft "
                "against tree) to results.md/json and a Pareto plot. Defaults: --methods " +
                    std::string("tree,pruned,graft,chain,suffix, --budgets 8,16,32,64, --skip-draft-gain 0"));
  sub->add_option("--model-profile", f.model_profiles,
                  "with --fixed-budget: comma list of the cost profiles its modelled speedups are priced by: "
                  "measured (this machine's cost profile) and/or rows-free (a pass costs its model's measured "
                  "1-row pass whatever its rows: a stand-in for a GPU). Default: both")
      ->delimiter(',');
  sub->add_option("--temps", f.temps, "comma list of temperatures (0 = greedy; at every temperature outputs are checked against ar with the same seed)")
      ->delimiter(',')->capture_default_str();
  sub->add_option("-n,--n-predict", f.n_predict, "new tokens per turn, at most")->capture_default_str();
  sub->add_option("--reps", f.reps, "repetitions of the whole run (fresh engines each)")->capture_default_str();
  sub->add_option("--max-prompt-tokens", f.max_prompt_tokens,
                  "cap on a prompt's tokens (0 = what fits -c with the answers and one tree)");
  sub->add_option("--long-prompts", f.long_prompts,
                  "over the cap: truncate (cut the middle of the first turn, keeping its start and the instruction "
                  "at its end) or skip")->capture_default_str();
  sub->add_flag("--warmup,!--no-warmup", f.warmup, "one short untimed generation per configuration first (default on)");
  sub->add_flag("--oracle", f.oracle, "also run the oracle (ar's own output as the tree) and report fractions of it");
  sub->add_flag("--quick", f.quick,
                "preset: 1 prompt per category, -n 32, methods ar,chain,tree,pruned,suffix,graft, budget 16, "
                "prompts cut to 512 tokens (flags given explicitly win)");
  sub->add_option("--system", f.system, "system message (chat template)");
  sub->add_flag("--raw", f.raw, "no chat template: BOS + text, turns joined by blank lines");
  sub->add_flag("--save-outputs", f.save_outputs, "store each output's text, and the prompt and output tokens, in results.json");
  sub->add_flag("--no-plots", f.no_plots, "do not run scripts/plot_bench.py at the end");
  sub->add_option("--learned-state", f.learned_state,
                  "start every engine from this learned state (graft generate / serve keep one per model pair, "
                  "see --learned-state there); read only. Default: every engine starts cold");
  sub->add_option("-o,--out", f.out, "output folder (default: bench-<UTC date-time>)");
  // Decoding knobs shared with `graft generate` (method, budget and temperature are lists here).
  sub->add_option("--draft-max", f.decode.draft_max, "deepest draft level (chain: draft length)");
  sub->add_option("--draft-min", f.decode.draft_min, "chain: minimum draft length");
  sub->add_option("--draft-p-min", f.decode.draft_p_min, "chain: stop drafting below this draft probability");
  sub->add_option("--draft-topk", f.decode.draft_topk, "tree: children per expanded draft node");
  sub->add_option("--draft-frontier", f.decode.draft_frontier, "tree: draft nodes expanded per level");
  sub->add_option("--prune-p-min", f.decode.prune_p_min, "pruned/graft: drop nodes whose calibrated acceptance is below");
  sub->add_option("--skip-draft-gain", f.decode.skip_draft_gain,
                  "graft: skip the draft model when retrieval alone expects this many accepted tokens (0 = never; "
                  "default 2, 0 with --fixed-budget)");
  AddLossOptions(sub, &f.decode);
  sub->add_option("--top-k", f.decode.top_k, "top-k sampling at temperature > 0 (0 = off)");
  sub->add_option("--top-p", f.decode.top_p, "top-p sampling at temperature > 0 (1 = off)");
  sub->add_option("-s,--seed", f.decode.seed, "random seed (varied per prompt, equal across methods)");
  sub->callback([flags, run] { *run = [flags] { return RunBench(*flags); }; });
}

}  // namespace graft::cli
