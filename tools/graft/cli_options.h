// Flags shared by the subcommands that run models (generate, bench, serve, index):
// model paths with defaults, context, threads, decoding method and its knobs.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "graft/backend.h"
#include "graft/engine.h"

namespace graft::cli {

// Where scripts/setup.sh puts the models: $GRAFT_MODEL_DIR or ~/.cache/graft/models.
std::string ModelDir();
std::string DefaultTargetPath();
std::string DefaultDraftPath();

struct ModelFlags {
  std::string target;       // -m; "" = default target
  std::string draft;        // -md; "" = default draft when -m is also absent
  bool no_draft = false;    // --no-draft
  std::string index;        // --index
  int32_t threads = 2;      // -t
  int32_t ctx = 4096;       // -c
  std::string profile_dir;  // --profile-dir; "" = default cache folder
  bool no_lazy_logits = false;  // --no-lazy-logits
  bool verbose = false;     // -v
  void Add(CLI::App* app);
};

struct DecodeFlags {
  std::string method;  // "" = graft with a draft model, else ar
  int32_t tree_budget = 16;
  int32_t draft_max = 6;
  int32_t draft_min = 0;
  float draft_p_min = 0.0f;
  int32_t draft_topk = 4;
  int32_t draft_frontier = 4;
  float prune_p_min = 0.05f;
  float skip_draft_gain = 2.0f;
  double max_loss = DecodeOptions{}.max_loss;
  double loss_grant = DecodeOptions{}.loss_grant;
  double loss_prefill = DecodeOptions{}.loss_prefill;
  double loss_sure_cap = DecodeOptions{}.loss_sure_cap;
  bool fixed_budget = false;
  float temp = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  // -s. Where Add registered it (generate, serve) and it is not given, a run draws a
  // fresh seed (ToSampling; serve: each request) and reports the one that ran; a
  // command that binds `seed` itself (bench) keeps this fixed default so its runs repeat.
  uint64_t seed = 42;
  CLI::Option* seed_option = nullptr;  // set by Add
  bool SeedGiven() const { return seed_option == nullptr || seed_option->count() > 0; }
  void Add(CLI::App* app);
  // Builds and validates the options (throws graft::Error with a clear message).
  DecodeOptions ToOptions(bool has_draft) const;
  // The sampling flags; the seed is `seed`, or FreshSeed() when !SeedGiven().
  SamplingParams ToSampling() const;
};

// --max-loss, --loss-grant, --loss-prefill and --loss-sure-cap (DecodeOptions::max_loss,
// loss_grant, loss_prefill, loss_sure_cap), for DecodeFlags and graft bench's own knobs.
void AddLossOptions(CLI::App* app, DecodeFlags* d);

// --learned-state / --no-learned-state (graft generate, graft serve): the file of what
// engines with these models learnt before (graft/learned_state.h).
struct LearnedFlags {
  std::string path;  // "" = the default file beside the cost profiles
  bool off = false;
  void Add(CLI::App* app);
  // The file for these models ("" when off).
  std::string PathFor(const ModelFlags& models, const Model& target, const Model* draft) const;
};

// Loaded target, optional draft, and an engine over them.
struct LoadedModels {
  std::unique_ptr<Model> target;
  std::unique_ptr<Model> draft;
  std::unique_ptr<Engine> engine;
};
LoadedModels LoadModels(const ModelFlags& flags, int32_t max_tree);
// The engine settings these flags ask for.
EngineConfig MakeEngineConfig(const ModelFlags& flags, int32_t max_tree);
// The models alone (engine left null).
LoadedModels LoadModelFiles(const ModelFlags& flags);

}  // namespace graft::cli
