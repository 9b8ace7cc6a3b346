#include "cli_options.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "graft/error.h"
#include "graft/learned_state.h"

namespace graft::cli {

std::string ModelDir() {
  if (const char* d = std::getenv("GRAFT_MODEL_DIR"); d != nullptr && *d != '\0') return d;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/graft/models";
}

std::string DefaultTargetPath() { return ModelDir() + "/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"; }
std::string DefaultDraftPath() { return ModelDir() + "/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"; }

void ModelFlags::Add(CLI::App* app) {
  app->add_option("-m,--model", target, "target model (GGUF); default: Qwen2.5-Coder 1.5B from scripts/setup.sh");
  app->add_option("--model-draft", draft,
                  "-md: draft model (GGUF, same tokenizer); default: Qwen2.5-Coder 0.5B when -m is absent");
  app->add_flag("--no-draft", no_draft, "do not load a draft model");
  app->add_option("--index", index, "corpus datastore built by `graft index build` (methods rest, graft)");
  app->add_option("-t,--threads", threads, "CPU threads")->check(CLI::Range(1, 512));
  app->add_option("-c,--ctx-size", ctx, "context size in tokens (prompt + output + one tree)")
      ->check(CLI::Range(64, 1 << 20));
  app->add_option("--profile-dir", profile_dir,
                  "where cost profiles are cached (default: $GRAFT_PROFILE_DIR, else ~/.cache/graft/profiles)");
  app->add_flag("--no-lazy-logits", no_lazy_logits,
                "run the target's output layer for every row of a pass, as llama.cpp does, not only for the rows "
                "verification reads (a separate cost profile)");
  app->add_flag("-v,--verbose", verbose, "print llama.cpp's log");
}

void LearnedFlags::Add(CLI::App* app) {
  CLI::Option* file = app->add_option(
      "--learned-state", path,
      "file of what earlier runs with these models learnt (acceptance per source), read at start and updated as "
      "requests finish; default: learned-<hash>.json in the profile folder");
  app->add_flag("--no-learned-state", off,
                "start cold and keep nothing (trees, and so speed, then depend only on the request and the profile)")
      ->excludes(file);
}

std::string LearnedFlags::PathFor(const ModelFlags& models, const Model& target, const Model* draft) const {
  if (off) return "";
  return path.empty() ? LearnedStatePath(LearnedStateKey(target, draft), models.profile_dir) : path;
}

void AddLossOptions(CLI::App* app, DecodeFlags* d) {
  app->add_option("--max-loss", d->max_loss,
                  "graft: how far a request may fall behind plain decoding, as a fraction of its modelled time "
                  "(plus --loss-grant 1-row passes); trees that could lose more are cut (-1 = no bound)")
      ->check(CLI::Range(-1.0, 10.0));
  app->add_option("--loss-grant", d->loss_grant,
                  "graft: with --max-loss, what a request may lose before it has gained anything, in 1-row passes")
      ->check(CLI::Range(0.0, 100.0));
  app->add_option("--loss-prefill", d->loss_prefill,
                  "graft: with --max-loss, the share of its prompt's modelled prefill a request may also lose once "
                  "it has emitted 16 tokens (earned over the next 32)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--loss-sure-cap", d->loss_sure_cap,
                  "graft: with --max-loss, how far (in 1-row passes) a bet whose first token the calibration rates "
                  ">= 0.9 may go past the bound, once (0 = never)")
      ->check(CLI::Range(0.0, 100.0));
}

void DecodeFlags::Add(CLI::App* app) {
  app->add_option("--method", method,
                  "ar | chain | tree | pruned | pld | suffix | rest | recycle | graft "
                  "(default: graft with a draft model, else ar)");
  app->add_option("--tree-budget", tree_budget, "verification budget N: tree nodes per target pass, root included");
  app->add_option("--draft-max", draft_max, "deepest draft level (chain: draft length)");
  app->add_option("--draft-min", draft_min, "chain: minimum draft length");
  app->add_option("--draft-p-min", draft_p_min,
                  "draft methods: do not propose a drafted token whose draft probability is below this "
                  "(a chain stops there, as llama.cpp's --draft-p-min)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--draft-topk", draft_topk, "tree: children per expanded draft node");
  app->add_option("--draft-frontier", draft_frontier, "tree: draft nodes expanded per level");
  app->add_option("--prune-p-min", prune_p_min, "pruned/graft: drop nodes whose calibrated acceptance is below");
  app->add_option("--skip-draft-gain", skip_draft_gain,
                  "graft: skip the draft model when retrieval alone expects this many accepted tokens (0 = never)");
  AddLossOptions(app, this);
  app->add_flag("--fixed-budget", fixed_budget,
                "always verify up to --tree-budget nodes, with no cost model (graft still skips the draft where "
                "retrieval alone expects --skip-draft-gain tokens)");
  app->add_option("--temp", temp, "sampling temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  app->add_option("--top-k", top_k, "top-k sampling (0 = off)")->check(CLI::NonNegativeNumber);
  app->add_option("--top-p", top_p, "top-p sampling (1 = off)")->check(CLI::Range(0.0, 1.0));
  seed_option = app->add_option("-s,--seed", seed,
                                "random seed (default: a fresh one, reported as `seed` in the stats; the same seed "
                                "gives the same text with every method)");
}

DecodeOptions DecodeFlags::ToOptions(bool has_draft) const {
  DecodeOptions o;
  o.method = method.empty() ? (has_draft ? Method::kGraft : Method::kAr) : ParseMethod(method);
  if (tree_budget < 1) throw Error("--tree-budget must be at least 1 (got " + std::to_string(tree_budget) + ")");
  if (draft_max < 1) throw Error("--draft-max must be at least 1");
  if (draft_topk < 1 || draft_frontier < 1) throw Error("--draft-topk and --draft-frontier must be at least 1");
  o.tree_budget = tree_budget;
  o.draft_max = draft_max;
  o.draft_min = draft_min;
  o.draft_p_min = draft_p_min;
  o.draft_topk = draft_topk;
  o.draft_frontier = draft_frontier;
  o.prune.min_accept_prob = prune_p_min;
  o.skip_draft_gain = skip_draft_gain;
  o.max_loss = max_loss;
  o.loss_grant = loss_grant;
  o.loss_prefill = loss_prefill;
  o.loss_sure_cap = loss_sure_cap;
  o.adaptive = !fixed_budget;
  return o;
}

SamplingParams DecodeFlags::ToSampling() const {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.seed = SeedGiven() ? seed : FreshSeed();
  return p;
}

LoadedModels LoadModelFiles(const ModelFlags& flags) {
  SetBackendVerbose(flags.verbose);
  LoadedModels out;
  const bool default_pair = flags.target.empty();
  out.target = Model::Load(default_pair ? DefaultTargetPath() : flags.target);
  std::string draft_path = flags.draft;
  if (draft_path.empty() && default_pair) draft_path = DefaultDraftPath();
  if (!draft_path.empty() && !flags.no_draft) {
    out.draft = Model::Load(draft_path);
    CheckDraftCompatible(*out.target, *out.draft);
  }
  return out;
}

EngineConfig MakeEngineConfig(const ModelFlags& flags, int32_t max_tree) {
  EngineConfig cfg;
  cfg.n_ctx = flags.ctx;
  cfg.n_threads = flags.threads;
  cfg.max_tree = max_tree;
  cfg.index_path = flags.index;
  cfg.profile_dir = flags.profile_dir;
  cfg.lazy_logits = !flags.no_lazy_logits;
  cfg.on_profile_measure = [](const std::string& path) {
    fprintf(stderr,
            "graft: no usable cost profile is cached for these models on this machine; measuring one now, once "
            "(on a small CPU this takes a minute or more; `graft tune` measures it ahead) into %s\n",
            path.c_str());
  };
  return cfg;
}

LoadedModels LoadModels(const ModelFlags& flags, int32_t max_tree) {
  LoadedModels out = LoadModelFiles(flags);
  out.engine = std::make_unique<Engine>(*out.target, out.draft.get(), MakeEngineConfig(flags, max_tree));
  return out;
}

}  // namespace graft::cli
