// The benchmark harness: every prompt through every configuration (method x budget x
// temperature), interleaved per prompt so that machine drift hits all alike.
//
//   Harness h(target, draft, {.methods = {Method::kAr, Method::kTree}, .budgets = {16}});
//   RunStatus s = h.Run(prompts, {.on_prompt = write_files}, &stop_flag);
//
// Fairness rules (see also results.md's header):
// - Each configuration runs on its own Engine (own KV cache, history index, next-token
//   table and calibration), created fresh for every repetition. Nothing one method
//   generated can leak into another's retrieval, and a repetition never sees the
//   outputs of an earlier one. The Models are shared (loaded once).
// - Per prompt the order is: ar, then each method x budget, then oracle x budget, for
//   each temperature. ar always runs (the baseline of speedup and losslessness).
// - The warm-up runs one short generation on each engine with learning off (no history,
//   calibration or table updates) before the first timed prompt.
// - Peers (llama.cpp's tools) run last, each invocation a fresh process given the
//   same prompt text; it must tokenize to the same tokens (else the row is an error).
//   Their outputs are compared with ar's as text (a tool may stop one token later).
// - mt_bench-style prompts with several turns run as a conversation: turn k+1 is
//   appended to the configuration's own answers through the chat template. A row sums
//   the turns (tokens, passes, times), as Spec-Bench does.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/dataset.h"
#include "graft/cost_profile.h"
#include "graft/engine.h"

namespace graft {
class CostModel;
}  // namespace graft

namespace graft::bench {

struct BenchConfig {
  Method method = Method::kAr;
  int32_t budget = 0;  // tree budget N (nodes per target pass); 0 for ar and peers
  float temperature = 0.0f;
  std::string peer;    // a llama.cpp tool (bench/peers.h) instead of our method; "" = ours
  // "ar", "<method>@<budget>" or the peer's name (the temperature is not part of it).
  std::string Name() const;
  // The method's name ("graft"), or the peer's.
  std::string Label() const;
  bool is_peer() const { return !peer.empty(); }
};

// How a modelled speedup prices the passes (`graft bench --model-profile`). Either way
// it is a model of the run, never a measurement of it.
enum class PriceProfile {
  kMeasured,  // this machine's cost profile, as graft's engines read it
  kRowsFree,  // a stand-in for a GPU: a pass costs its model's 1-row pass, whatever its rows
};
// "measured", "rows-free": the names results.json and results.md use.
std::string PriceProfileName(PriceProfile p);
// The profile named `name`; throws graft::Error naming the choices otherwise.
PriceProfile ParsePriceProfile(const std::string& name);

// The rows-free profile of a measured one: every target pass over n rows costs the
// measured 1-row pass, every draft pass the draft's 1-row pass (so the draft / target
// ratio is the measured one), and reading a row's logits costs nothing. Its long-prefix
// curves are flat at the measured 1-row pass there, so a pass still grows with its
// context (CostModel::Of fits a per-pass cost and no per-row one). Its key and date are
// the measured profile's. O(sizes).
CostProfile RowsFreeProfile(const CostProfile& measured);

enum class LongPromptPolicy {
  kTruncate,  // cut the middle of the first user turn: its start and its end (the
              // instruction, for long and code_edit prompts) survive
  kSkip,      // leave the prompt out (listed in RunStatus::skipped)
};

struct HarnessOptions {
  std::vector<Method> methods;            // ar is added (first) when absent; no kOracle here
  std::vector<int32_t> budgets = {16};    // every non-ar method runs once per budget
  std::vector<float> temperatures = {0};  // every configuration runs once per temperature
  bool oracle = false;      // also run Method::kOracle fed with ar's output, per budget
  int32_t n_predict = 128;  // new tokens per turn, at most
  int32_t reps = 1;         // repetitions of the whole run (fresh engines each time)
  bool warmup = true;
  DecodeOptions decode;     // draft/prune knobs (adaptive = false: --fixed-budget); method and
                            // tree_budget set per configuration
  // The modelled speedups to give (BenchRow::modelled_by), each pricing every row's
  // passes its way; `modelled_speedup` is the measured profile's whatever this says.
  std::vector<PriceProfile> price_profiles = {PriceProfile::kMeasured};
  SamplingParams sampling;  // temperature set per configuration; the seed is varied per
                            // prompt and repetition, equal across configurations
  int32_t n_ctx = 4096;     // upper bound; engines get the smallest multiple of 256 that fits
  int32_t n_threads = 2;
  bool lazy_logits = true;  // EngineConfig::lazy_logits, and the profile's
  std::string profile_dir;  // where cost profiles are cached ("" = the default folder)
  std::string index_path;   // corpus datastore for rest / graft ("" = none)
  // Every engine starts from this learned state (graft/learned_state.h; never written
  // here), so every method and repetition sees the same start; "" = cold.
  std::string learned_state;
  std::string system;       // system message ("" = none)
  bool raw = false;         // no chat template: BOS + text (turns joined by blank lines)
  int32_t max_prompt_tokens = 0;  // cap on the first turn's prompt (0 = what fits n_ctx)
  LongPromptPolicy long_prompts = LongPromptPolicy::kTruncate;
  bool keep_outputs = false;      // rows carry the output text, and their prompt and output tokens
  // llama.cpp's own tools (bench/peers.h names), run after our configurations for
  // every prompt at temperature 0, from `peers_dir` (their programs must exist there).
  std::vector<std::string> peers;
  std::string peers_dir;
  double peer_timeout_s = 900;    // per tool invocation
};

// ms the row's passes cost on `costs`: every target pass at its rows and context
// (CostModel::VerifyPassesMs), every draft pass at DraftMs(its rows) at the profile's
// prefix (GenerationStats::pass_rows, draft_pass_rows). 0 for a row without passes
// (a peer's). O(histogram size).
double ModelledMs(const GenerationStats& stats, const CostModel& costs);

// One prompt x configuration x repetition (turns summed).
struct BenchRow {
  int32_t prompt_index = 0;  // position in the prompt list given to Run
  std::string prompt_id;
  std::string category;
  int32_t turns = 1;         // turns run (a conversation stops early only at the context end)
  BenchConfig config;
  int32_t rep = 0;
  bool truncated = false;    // the first turn was cut to fit max_prompt_tokens
  GenerationStats stats;     // summed over turns; stop_reason of the last turn
  double wall_ms = 0;        // Generate calls, prefill included
  std::vector<std::vector<Token>> outputs;  // [turns] generated tokens
  std::string text;          // outputs joined by "\n\n" (keep_outputs and peers)
  std::vector<std::vector<Token>> prompts;  // [turns] prompt tokens (keep_outputs, our methods)
  std::vector<std::string> turn_texts;  // peers: each turn's output text
  std::string error;         // peers: why the tool gave no result (the row has no speedup)

  // Filled once the prompt's baseline rows exist:
  std::optional<bool> lossless;        // outputs == ar's (same seed at T > 0); peers: T = 0 only
  int32_t first_divergence = -1;       // first token index differing from ar's (-1 = none)
  std::optional<double> speedup;       // decode tokens/s over ar's (prefill excluded)
  std::optional<double> e2e_speedup;   // ar's wall ms for as many tokens / this wall ms (prefill included)
  std::optional<double> oracle_fraction;  // speedup / the oracle's speedup at this budget
  // The speedup with every pass priced by the cost profile instead of the clock
  // (ModelledMs): the method's effect without the machine's noise. Our methods only.
  std::optional<double> modelled_speedup;
  std::optional<double> modelled_ms;  // the row's passes priced by the cost profile (ModelledMs)
  // PriceProfileName -> the modelled speedup with the passes priced by that profile
  // (HarnessOptions::price_profiles); our methods only, and only with a profile.
  std::map<std::string, double> modelled_by;

  int32_t new_tokens() const { return stats.n_generated; }
  double decode_tps() const { return stats.t_decode_ms > 0 ? stats.n_generated * 1000.0 / stats.t_decode_ms : 0; }
  double wall_tps() const { return wall_ms > 0 ? stats.n_generated * 1000.0 / wall_ms : 0; }
};

struct SkippedPrompt {
  std::string prompt_id, category;
  int32_t tokens;  // prompt tokens (after cutting, for a duplicate)
  int32_t cap;     // the prompt cap (a too-long prompt exceeds it)
  // Not empty: the prompt was left out because, once cut to the cap, all its turns are
  // those of this earlier prompt (a dataset's near-copies can become one prompt when
  // cut; run twice, it would count twice in every figure). Empty: it was too long.
  std::string same_as;
};

struct RunStatus {
  int32_t prompts_total = 0;  // prompts x reps that would run (skipped ones, too long or duplicates, excluded)
  int32_t prompts_done = 0;   // finished: all their configurations have rows
  bool interrupted = false;   // the stop flag ended the run early
  std::vector<SkippedPrompt> skipped;
};

struct ProgressEvent {
  int64_t done = 0, total = 0;  // generations (prompt x configuration x rep) finished / planned
  int32_t prompt = 0, n_prompts = 0, rep = 0;
  std::string category, config;
  bool warmup = false;          // the warm-up phase (done/total not advancing)
};

struct HarnessCallbacks {
  // After each finished prompt: every row so far (complete prompts only).
  std::function<void(const std::vector<BenchRow>& rows, const RunStatus& status)> on_prompt;
  std::function<void(const ProgressEvent&)> on_progress;  // after each generation
};

class Harness {
 public:
  // Checks every configuration against the models (draft / index present, budgets in
  // range) and throws graft::Error with the flag that fixes it.
  Harness(const Model& target, const Model* draft, HarnessOptions options);
  ~Harness();

  const std::vector<BenchConfig>& configs() const { return configs_; }  // run order
  const HarnessOptions& options() const { return options_; }

  // Runs everything. `stop` (may be null) is polled between generations and while
  // tokens stream: a set flag cancels the current generation, drops that prompt's rows
  // and returns with status.interrupted. Rows of finished prompts stay in rows().
  RunStatus Run(const std::vector<BenchPrompt>& prompts, const HarnessCallbacks& callbacks,
                const std::atomic<bool>* stop);
  const std::vector<BenchRow>& rows() const { return rows_; }
  // The cost profile Run priced the modelled speedups with (graft's engines read the
  // same one); none before Run, or when none could be had.
  const std::optional<CostProfile>& profile() const { return profile_; }

 private:
  struct Impl;
  const Model& target_;
  const Model* draft_;
  HarnessOptions options_;
  std::vector<BenchConfig> configs_;
  std::vector<BenchRow> rows_;
  std::optional<CostProfile> profile_;
};

}  // namespace graft::bench
