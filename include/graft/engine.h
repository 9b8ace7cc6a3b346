// The decoding engine: one loop (propose -> verify -> learn -> commit), every method
// a proposer that builds the tree the target verifies (draft, prune, retrieve, graft).
//
//   Engine engine(target, draft_or_null, {.n_ctx = 4096});
//   GenerateRequest req{.prompt = tokens, .n_predict = 128};
//   GenerateResult out = engine.Generate(req, {.method = Method::kGraft});
//
// An Engine owns the target's and the draft's KV caches and the learned state that
// outlives a request (history index, next-token table, calibration); it serves one
// request at a time (callers serialise). An EngineGroup serves several at once:
// its engines share one target cache and every step is one target pass for all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graft/backend.h"
#include "graft/cost_profile.h"
#include "graft/prune.h"
#include "graft/sampling.h"
#include "graft/types.h"

namespace graft {

enum class Method {
  kAr,       // plain decoding: one token per target pass
  kChain,    // draft model, linear chain (llama.cpp speculative)
  kTree,     // dense draft tree, EAGLE-2 style
  kPruned,   // dense draft tree after calibrated pruning
  kPld,      // prompt lookup (n-gram match in prompt + output), linear
  kSuffix,   // request-local + history suffix index, tree
  kRest,     // corpus datastore (--index), tree
  kRecycle,  // next-token table from verification logits, tree
  kGraft,    // pruned draft tree + retrieval grafted into the freed slots
  kOracle,   // the recorded target continuation (benchmark upper bound)
};

// "ar", "chain", ... Throws graft::Error naming the valid methods for an unknown name.
Method ParseMethod(const std::string& name);
std::string MethodName(Method m);
bool MethodNeedsDraft(Method m);
std::vector<Method> AllMethods();  // every method except kOracle

struct EngineConfig {
  int32_t n_ctx = 4096;
  int32_t n_threads = 2;
  int32_t max_tree = 64;             // largest verification tree the contexts accept
  std::string index_path;            // corpus datastore for rest / graft ("" = none)
  int32_t history_tokens = 1 << 20;  // capacity of the cross-request history index
  // Keep the KV cache of a prompt prefix shared with the previous request (of this
  // engine, or of this slot in an EngineGroup): a chat's next turn, which repeats the
  // conversation so far, then prefills only its new tokens (llama-server's
  // cache_prompt; `graft serve --cache-prompt`). Off by default: batched and
  // single-token kernels round differently, so a reused prefix can flip a near-tie and
  // the same request would not always give the same output.
  bool reuse_prefix = false;
  // Where graft's cost profiles are cached (graft/cost_profile.h); "" = the default
  // ($GRAFT_PROFILE_DIR, else ~/.cache/graft/profiles).
  std::string profile_dir;
  // A file of what engines with these models learnt before (graft/learned_state.h):
  // read when the engine is made (missing: start cold; unusable: a warning, start
  // cold), written by SaveLearned. "" = start cold and keep nothing. The tokens do not
  // depend on it beyond near-ties (lossless); the trees, and so the speed, do.
  std::string learned_state;
  // The target's output layer only for the rows verification reads (ContextOptions::
  // lazy_logits): a rejected row costs its layers alone. The cost profile is measured
  // the same way (CostProfileOptions::lazy_logits).
  bool lazy_logits = true;
  // Called before the engine measures a cost profile because none is cached
  // (CostProfileOptions::on_measure); the CLI tells its user there.
  std::function<void(const std::string& path)> on_profile_measure;
};

// The cost profile an engine made with `config` reads (threads, largest tree up to 32
// rows, lazy logits, folder); anything that prices an engine's passes, or writes a
// profile for one, asks for the same.
CostProfileOptions CostProfileOptionsOf(const EngineConfig& config);

struct DecodeOptions {
  Method method = Method::kAr;
  int32_t tree_budget = 16;     // N: nodes per verification pass, root included
  int32_t draft_max = 6;        // deepest draft level (chain: its length)
  int32_t draft_min = 0;        // chain: skip drafts shorter than this
  float draft_p_min = 0.0f;     // draft methods: a drafted token whose draft probability is
                                // below this is not proposed (llama.cpp's --draft-p-min)
  int32_t draft_topk = 4;       // tree: children per expanded node
  int32_t draft_frontier = 4;   // tree: nodes expanded per level (K)
  PruneOptions prune;           // pruned / graft
  int32_t retrieve_nodes = 4;   // graft: tree nodes (best first) queried for retrieval
  // graft: skip the draft model for a step when retrieval alone (request, history,
  // corpus) already expects at least this many accepted tokens (calibrated); the
  // draft pass is the main cost on CPU. 0 = always draft.
  float skip_draft_gain = 2.0f;
  // graft: choose each step's tree size from the cost of a target pass per tree size
  // (the cached cost profile, graft/cost_profile.h) and run the draft model only while
  // it raises modelled throughput (src/engine/cost_model.h). Deterministic: the same
  // request, seed and profile give the same tokens. false = fixed budget, always draft.
  bool adaptive = true;
  // graft (adaptive): how far a request may fall behind plain decoding, as a fraction
  // of plain decoding's modelled time for the tokens it emitted, plus `loss_grant`
  // 1-row passes; a tree whose worst case (only its root's token accepted) would go
  // past that is cut to what fits (LossBudget, src/engine/cost_model.h). < 0 = no bound.
  // Past its first 16 tokens a request also earns `loss_prefill` of its prompt's
  // modelled prefill, over the next 32 (LossBudgetOptions::prefill_share). So an answer
  // of T <= 16 tokens runs at >= 1 / (1 + max_loss + loss_grant / T) of plain decoding's
  // modelled speed: at these defaults >= 0.95 from T = 10 on, and past 16 tokens still
  // >= 0.95 for prompts of up to 256 tokens (issue 9: no prompt below 0.95x). On a 2-core
  // Xeon a grant of 2 let 15-17-token qa answers spend it on 4-row bets accepted 9% of
  // the time (0.905-0.935x modelled); a grant of 0.3 alone left a long document's summary
  // unable to bet again for ~15 tokens after a miss (0.97x where it had got 1.12x); the
  // prefill's share gives long prompts that room back once the answer is not short
  // (docs/bench-2026-12-04-xeon-budget*).
  // A sure bet (its first token rated >= 0.9 by a calibration cell with >= 4 outcomes)
  // may go past that bound by up to `loss_sure_cap` 1-row passes, once: the room cannot
  // fall below -loss_sure_cap passes (LossBudgetOptions::sure_cap), so the bounds above
  // hold unless such a bet fails; the worst case is then 1 / (1.02 + 2.3 / T) (0.95
  // from T = 71 on). Without it, one missed bet early in a code edit kept the request
  // from verifying copies rated 0.97 for the next 20 tokens; replayed on 32 code edits
  // it raised graft from 1.45x to 1.69x modelled, and left Spec-Bench, long documents
  // and the older code-edit outputs within 0.01x (bench/replay_retrieval,
  // docs/bench-2026-12-05-xeon-code_edit32). 0 = off.
  double max_loss = 0.02;
  double loss_grant = 0.3;
  double loss_prefill = 0.01;
  double loss_sure_cap = 2.0;
  bool learn = true;            // update history, next-token table and calibration
};

struct GenerateRequest {
  std::vector<Token> prompt;                  // tokenized, BOS included if wanted
  int32_t n_predict = 128;                    // new tokens at most (>= 1)
  SamplingParams sampling;                    // temperature 0 = greedy
  std::vector<Token> oracle;                  // kOracle: the recorded continuation
  // Called after each target pass with the newly emitted tokens; return false to
  // stop (a cancelled stream). May be empty.
  std::function<bool(const std::vector<Token>&)> on_tokens;
  // Polled between prefill chunks (n_batch tokens): return true to stop before the
  // first token (stop_reason "cancelled"). May be empty.
  std::function<bool()> cancelled;
  // Keep the cache of the prompt prefix this request shares with the one before it on
  // its engine or slot (llama-server's cache_prompt); unset = EngineConfig::reuse_prefix.
  std::optional<bool> reuse_prefix;
};

struct SourceCounts {
  int64_t proposed = 0;  // nodes of this source in verified trees
  int64_t accepted = 0;  // of those, accepted by the target
};

struct GenerationStats {
  int32_t n_prompt = 0;
  // Of those, the prompt's first tokens whose cache was kept from the request before
  // (GenerateRequest::reuse_prefix): not prefilled again.
  int32_t n_prompt_cached = 0;
  int32_t n_generated = 0;
  int32_t n_passes = 0;          // target verification passes (prefill excluded)
  int64_t n_draft_passes = 0;    // draft-model decode calls
  int32_t n_draft_steps = 0;     // target passes whose tree the draft model helped build
  int32_t n_draft_declined = 0;  // graft under load: drafts offered that the group passed over
  int64_t nodes_verified = 0;    // tree nodes evaluated by the target, roots included
  int64_t n_drafted = 0;         // draft-model nodes in verified trees
  int64_t n_grafted = 0;         // retrieval / oracle nodes in verified trees
  int64_t n_accepted = 0;        // proposed nodes accepted (bonus tokens excluded)
  // Rows after the root whose logits a lazy pass computed (ContextOptions::lazy_logits):
  // alone, and read ahead in one product with the root's (Context::HintReads; some
  // of those were then not read). Their modelled ms: CostModel::ReadsMs.
  int64_t rows_read = 0, rows_read_ahead = 0;
  // The products over c >= 2 rows among them, by c ([c]; empty when none): a product
  // costs by its rows, not linearly (CostModel::ReadsMs).
  std::vector<int64_t> read_products;
  SourceCounts per_source[kNumSources];
  double t_prefill_ms = 0, t_draft_ms = 0, t_retrieve_ms = 0, t_graft_ms = 0;
  double t_verify_ms = 0, t_commit_ms = 0, t_decode_ms = 0;  // decode = all after prefill
  double t_calibrate_ms = 0;  // graft: cost-profile measurement (only when none was cached)
  // Passes by their rows: pass_rows[n] = target passes over n tree rows (sums to
  // n_passes), draft_pass_rows[n] = draft decode calls over n rows (sums to
  // n_draft_passes; a catch-up counts its tokens). Priced by a cost profile they give
  // what the run would cost on a steady machine (graft bench's modelled speedup).
  std::vector<int32_t> pass_rows, draft_pass_rows;
  // Sums over target passes of the request's tokens L when the pass ran, and of rows
  // x L: with pass_rows they price each pass at its context (ContextCost is linear).
  double pass_context = 0, pass_row_context = 0;
  std::string stop_reason;  // "eog", "length", "cancelled", "context"
  // The request's SamplingParams::seed: with the same prompt, sampling params and seed,
  // any method writes the same tokens again (PositionSampler), so an answer at T > 0
  // can be reproduced from its stats (`seed` in StatsToJson).
  uint64_t seed = 0;

  // Sums every count and time of `other` into this (stop_reason and seed: other's).
  // O(rows in the histograms).
  void Add(const GenerationStats& other);

  // One more pass over `rows` rows in `hist` (pass_rows or draft_pass_rows), grown as
  // needed. O(1) amortised.
  static void CountPass(std::vector<int32_t>* hist, int32_t rows);

  // Mean tokens per target pass, bonus included.
  double tau() const { return n_passes ? static_cast<double>(n_generated) / n_passes : 0; }
  double acceptance() const {
    const int64_t p = n_drafted + n_grafted;
    return p ? static_cast<double>(n_accepted) / p : 0;
  }
  // Prompt tokens prefilled per second (the cached ones were not).
  double prefill_tps() const { return t_prefill_ms > 0 ? (n_prompt - n_prompt_cached) * 1000.0 / t_prefill_ms : 0; }
  double decode_tps() const { return t_decode_ms > 0 ? n_generated * 1000.0 / t_decode_ms : 0; }
};

struct GenerateResult {
  std::vector<Token> tokens;  // generated tokens (end-of-generation token excluded)
  GenerationStats stats;
};

class Engine {
 public:
  // `draft` may be null (no draft methods then). Both models must outlive the engine.
  // Throws graft::Error for an incompatible draft or an unreadable index.
  Engine(const Model& target, const Model* draft, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks that `options` can run on this engine (draft present, index present,
  // budget in range); throws graft::Error with an actionable message otherwise.
  void Validate(const DecodeOptions& options) const;

  GenerateResult Generate(const GenerateRequest& request, const DecodeOptions& options);

  // Loads the cost profile graft's policy uses (graft/cost_profile.h), measuring it
  // first when none is cached for these models on this machine. Returns the ms spent
  // measuring (0 when it was cached or already loaded). The first adaptive graft
  // request does this itself; a server calls it before taking requests.
  double PrepareCostProfile();

  // Writes what the engine has learnt (its calibration, on top of the state it was
  // made with) to config.learned_state, atomically, at most kLearnedKeepTrials per
  // source; false (nothing written) when the config names no file. Throws
  // graft::Error naming the file when it cannot. A few KiB; O(calibration cells).
  bool SaveLearned() const;

  const Model& target() const;
  const Model* draft() const;
  bool has_index() const;

 private:
  friend class EngineGroup;
  // An engine on lane `lane` of a target context and a draft context (null without a
  // draft) shared with other engines.
  Engine(const Model& target, const Model* draft, const EngineConfig& config, std::shared_ptr<Context> shared_target,
         std::shared_ptr<Context> shared_draft, int32_t lane);
  struct State;
  std::unique_ptr<State> s_;
};

struct EngineGroupOptions {
  int32_t slots = 1;            // requests in flight at once (lanes of the shared target cache)
  int32_t prefill_chunk = 256;  // prompt tokens at most per step, all joining requests together
                                // (shortest remaining first, aged by prefill_chunk / 8 per step waited)
  // Size each request's tree against the whole pass (BatchLoad, graft's adaptive
  // policy): as requests join, trees shrink, down to plain decoding batched across them.
  bool load_aware = true;
  // Every request that drafts in a step shares each draft pass (DraftTogether); false
  // = each drafts in passes of its own, one request after another (for comparison).
  bool share_draft_passes = true;
};

// Continuous batching: several requests decoded together over one target KV cache.
// Each slot is an engine of its own (its learned state, its draft cache) on its own
// lane of the shared target context; Step() puts every active slot's work, a chunk of
// a joining prompt or a speculative step's tree, into one target pass, then verifies
// and commits each slot separately. So a stream's tokens are those its engine alone
// would give (greedy: up to near-ties, where the batched kernels round differently,
// as for any tree). The draft model works the same way: one draft context with a lane
// per slot, and every slot that drafts this step shares each draft pass (the
// catch-ups, then level by level). Requests join (Start) and leave (finished,
// cancelled) between steps. One thread drives a group; it is not thread-safe.
//
//   EngineGroup group(target, draft, config, {.slots = 4});
//   group.Start(0, request, {.method = Method::kGraft});
//   while (!group.idle()) for (auto& f : group.Step()) use(f.slot, f.result);
class EngineGroup {
 public:
  // Throws graft::Error for an incompatible draft, an unreadable index or a slot count
  // the cache cannot hold (slots x config.max_tree sequence ids at most 256).
  EngineGroup(const Model& target, const Model* draft, const EngineConfig& config, const EngineGroupOptions& options);
  ~EngineGroup();
  EngineGroup(const EngineGroup&) = delete;
  EngineGroup& operator=(const EngineGroup&) = delete;

  int32_t slots() const { return static_cast<int32_t>(engines_.size()); }
  // For Validate (every slot has the same configuration).
  const Engine& engine(int32_t slot) const { return *engines_.at(slot); }
  bool busy(int32_t slot) const;
  bool idle() const;  // no slot busy

  // Begins `request` on free slot `slot` (its prompt is prefilled by the next steps).
  // Throws graft::Error for options the engine cannot run or a request it cannot take
  // (Engine::Validate; empty prompt, no room in the context); the slot stays free.
  void Start(int32_t slot, GenerateRequest request, const DecodeOptions& options);

  struct Finished {
    int32_t slot;
    GenerateResult result;  // stop_reason as Generate's ("cancelled" by on_tokens / cancelled)
    std::string error;      // non-empty: the generation failed (result holds what was emitted)
  };
  // One target pass over every busy slot's work; on_tokens of each request that
  // emitted is called from here. Returns the requests that finished (their slots are
  // free again). A pass that fails fails the requests in it, not the group.
  std::vector<Finished> Step();

  // Cost profile of every slot (Engine::PrepareCostProfile); ms spent measuring.
  double PrepareCostProfile();

  // How many of `prompt`'s first tokens free slot `slot` holds in its cache, all but
  // the last at most (0 when the slot is busy): what a request started there now keeps
  // when it reuses its prefix (GenerateRequest::reuse_prefix), and what a scheduler
  // looks at to send a conversation's next turn back to the slot that holds its start.
  // O(common prefix).
  int32_t CachedPrefix(int32_t slot, std::span<const Token> prompt) const;

  // Engine::SaveLearned for the whole group: the state the slots were made with, plus
  // what each slot has learnt since.
  bool SaveLearned() const;

  // Draft-model passes the steps have run so far, each shared by every request that
  // drafted in its step (a request's n_draft_passes counts the ones it took part in).
  int64_t draft_passes() const { return draft_passes_; }
  // Where the steps' time went, each shared pass counted once (a request's own
  // GenerationStats count every pass it waited for, in full): ms in target passes
  // (EvalLanes), and ms drafting (draft prompts' prefill and the shared draft passes).
  double target_pass_ms() const { return target_pass_ms_; }
  double draft_ms() const { return draft_ms_; }

 private:
  // Drafts of every slot that asked for one this step, in shared passes (DraftTogether).
  void DraftAll(const std::vector<int32_t>& slots, std::vector<Finished>* done);
  // Ends `slot`'s request with `error` (what it emitted kept) and empties its lanes.
  void Fail(int32_t slot, const std::string& error, std::vector<Finished>* done);

  EngineGroupOptions options_;
  std::shared_ptr<Context> target_ctx_;
  std::shared_ptr<Context> draft_ctx_;  // null without a draft
  int64_t draft_passes_ = 0;
  double target_pass_ms_ = 0, draft_ms_ = 0;
  std::vector<std::unique_ptr<Engine>> engines_;
};

// "decoded 128 tokens in 3.2 s, 40.0 t/s ..." in llama.cpp's speculative form.
std::string FormatStats(const GenerationStats& st, Method m);

}  // namespace graft
