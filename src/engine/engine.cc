// The decoding loop. Every method is a Proposer (proposer.h); one step is
//   propose -> verify (one target pass) -> learn -> commit -> emit.
#include "graft/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "engine/proposer.h"
#include "graft/cost_profile.h"
#include "graft/error.h"
#include "graft/learned_state.h"
#include "graft/verify.h"

namespace graft {

namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// `v` in [lo, hi]. Written so that NaN fails: it compares false with everything, so a
// plain `v < lo || v > hi` check lets it through (as CLI11's Range does).
void CheckIn(double v, double lo, double hi, const char* what) {
  if (!(v >= lo && v <= hi)) {
    throw Error(std::string(what) + " must be a number in [" + Num(lo) + ", " + Num(hi) + "] (got " + Num(v) + ")");
  }
}

}  // namespace

EngineState::EngineState(const Model& t, const Model* d, const EngineConfig& c)
    : target(t),
      draft(d),
      config(c),
      history(HistoryOptions{c.history_tokens, {}}),
      recycle(t.n_vocab()),
      // Cautious about a source's stated confidence, but optimistic about cells never
      // tried: measured by replaying recorded outputs (bench/replay_retrieval), a
      // scale learnt on failing short matches otherwise kept long copies unproposed
      // on machines whose 2-row pass costs 1.7x a 1-row one (graft = ar there). And
      // less trusting of a source that keeps failing in this request (request_strength).
      calibration(CalibrationOptions{.source_scale_prior = 0.5, .explore_strength = 2.0, .request_strength = 8.0}),
      request(RetrievalOptions{}, &history) {
  if (c.learned_state.empty()) return;
  try {
    if (std::optional<LearnedState> st = LoadLearnedState(c.learned_state, LearnedStateKey(t, d))) {
      calibration.Restore(st->calibration);
      calibration.CapTrials(kLearnedPriorTrials);
      learned_prior = calibration.Counts();
    }
  } catch (const Error& e) {
    fprintf(stderr, "graft: warning: %s; starting without it\n", e.what());
  }
}

CostProfileOptions CostProfileOptionsOf(const EngineConfig& config) {
  CostProfileOptions po;
  po.n_threads = config.n_threads;
  po.max_rows = std::min(config.max_tree, 32);
  po.dir = config.profile_dir;
  po.lazy_logits = config.lazy_logits;
  po.on_measure = config.on_profile_measure;
  return po;
}

const CostModel& EngineState::Costs(double* calibrate_ms) {
  if (!cost) {
    double ms = 0;
    CostProfile p = LoadOrMeasureCostProfile(target, draft, CostProfileOptionsOf(config), &ms);
    *calibrate_ms += ms;
    cost.emplace(CostModel::Of(p));
    // Tree sizing prices the rows FinishStep reads ahead as read ahead (a measured
    // curve of products sets the read block itself).
    if (p.read_ahead_ms > 0 && p.read_product_ms.empty()) cost->SetReadBlock(Context::kMaxReadBlock);
  }
  return *cost;
}

struct Engine::State : EngineState {
  using EngineState::EngineState;
  std::map<Method, std::unique_ptr<Proposer>> proposers;  // created on first use

  // One request in flight, stepped by Generate or by an EngineGroup: Start, prefill
  // chunks (PrefillLeft), BeginDecode, then Propose / one target pass / FinishStep
  // until FinishStep says it is over, then Finish.
  struct Flight {
    Flight(GenerateRequest r, const DecodeOptions& opt)
        : req(std::move(r)), o(opt), rs{req, o, req.prompt, 0, &result.stats}, sampler(req.sampling) {}
    GenerateRequest req;
    DecodeOptions o;
    GenerateResult result;
    RequestState rs;
    PositionSampler sampler;  // T > 0: the token at each output position, whatever the tree
    TokenTree tree;
    StepLimits limits{1, 0, {}};        // of the step being proposed
    std::optional<DraftParams> draft;  // the draft the proposer asked for, not yet run
    Proposer* proposer = nullptr;
    bool decoding = false;  // the prompt is prefilled
    int32_t joining_steps = 0;  // group steps it has been joining in (prefill ageing)
    std::chrono::steady_clock::time_point t0;  // start of the current phase (prefill, decode)
  };
  std::unique_ptr<Flight> flight;

  Proposer& ProposerFor(Method m) {
    auto& p = proposers[m];
    if (!p) p = MakeProposer(*this, m);
    return *p;
  }

  double PhaseMs(const Flight& f) const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f.t0).count();
  }

  void CheckRequest(const GenerateRequest& req) const {
    if (req.prompt.empty()) throw Error("the prompt is empty");
    if (req.n_predict < 1) throw Error("n_predict must be at least 1");
    const SamplingParams& sp = req.sampling;
    if (!std::isfinite(sp.temperature)) {
      throw Error("the temperature must be a finite number (got " + Num(sp.temperature) + ")");
    }
    if (std::isnan(sp.top_p)) throw Error("top-p must be a number (got nan)");
    if (static_cast<int32_t>(req.prompt.size()) >= tctx->n_ctx()) {
      throw Error("prompt is " + std::to_string(req.prompt.size()) + " tokens but the context holds " +
                  std::to_string(tctx->n_ctx()) + " (raise -c or shorten the prompt)");
    }
  }

  // Begins a request: the target cache keeps the prompt prefix it shares with the
  // previous request when config.reuse_prefix (the draft cache is cut to the same
  // prefix and catches up lazily), else starts empty.
  void Start(GenerateRequest req, const DecodeOptions& o) {
    CheckRequest(req);
    flight = std::make_unique<Flight>(std::move(req), o);
    Flight& f = *flight;
    f.result.stats.n_prompt = static_cast<int32_t>(f.req.prompt.size());
    f.result.stats.seed = f.req.sampling.seed;
    f.result.stats.stop_reason = "length";
    calibration.BeginRequest();
    const int32_t common = f.req.reuse_prefix.value_or(config.reuse_prefix) ? CachedPrefix(f.req.prompt) : 0;
    if (common < tctx->n_past(lane)) tctx->Truncate(common, lane);
    if (dctx && common < dctx->n_past(lane)) dctx->Truncate(common, lane);
    tctx_tokens.resize(tctx->n_past(lane));
    f.result.stats.n_prompt_cached = tctx->n_past(lane);
    f.t0 = std::chrono::steady_clock::now();
  }

  // The prompt's first tokens that this lane's cache holds, all but the last (the first
  // tree's root): what a request that reuses its prefix keeps.
  int32_t CachedPrefix(std::span<const Token> prompt) const {
    if (prompt.empty()) return 0;
    const size_t limit = std::min(tctx_tokens.size(), prompt.size() - 1);
    size_t common = 0;
    while (common < limit && tctx_tokens[common] == prompt[common]) ++common;
    return static_cast<int32_t>(common);
  }

  // Prompt tokens still to prefill: all but the last, which is the first tree's root.
  TokenSpan PrefillLeft() const {
    const std::vector<Token>& p = flight->req.prompt;
    return TokenSpan(p).subspan(tctx->n_past(lane), p.size() - 1 - tctx->n_past(lane));
  }

  // After a prefill chunk went into the target cache.
  void Prefilled(TokenSpan chunk) { tctx_tokens.insert(tctx_tokens.end(), chunk.begin(), chunk.end()); }

  // The prompt is in the cache: the proposer begins, the decode clock starts.
  void BeginDecode() {
    Flight& f = *flight;
    f.result.stats.t_prefill_ms += PhaseMs(f);
    f.proposer = &ProposerFor(f.o.method);
    f.proposer->Begin(f.rs);
    f.decoding = true;
    f.t0 = std::chrono::steady_clock::now();
  }

  // Builds the step's tree in flight->tree, to be evaluated after `pending` prompt
  // tokens in the same pass; false when the context is full (the generation is over,
  // stop reason "context"). When the proposer asks for a draft, flight->draft says
  // which, and the tree is finished by DraftAlone, or by a group's shared draft and
  // Drafted.
  bool Propose(const BatchLoad& load, int32_t pending = 0) {
    Flight& f = *flight;
    const int32_t room = tctx->n_ctx() - tctx->n_past(lane) - pending;
    if (room < 1) {
      f.result.stats.stop_reason = "context";
      return false;
    }
    // A node deeper than the tokens left to emit cannot add one: the step keeps at most
    // `left` tokens (the accepted path and the bonus), so nodes below depth left - 1
    // would only be verified and dropped.
    const int32_t left = std::max(1, f.rs.request.n_predict - f.rs.generated);
    f.limits = StepLimits{std::max(1, std::min(f.o.tree_budget, room)), std::min(room, left) - 1, load};
    f.tree.Reset(f.rs.committed.back());
    f.draft = f.proposer->Propose(f.rs, f.limits, &f.tree);
    if (f.draft) f.tree.Reset(f.rs.committed.back());
    return true;
  }

  // Runs the draft flight->draft asks for, on this engine's own passes.
  void DraftAlone() {
    Flight& f = *flight;
    const DraftCall call = DraftTree(*this, f.rs, *f.draft, &f.tree);
    Drafted(call);
  }

  // The group passed over the draft flight->draft offered: the proposer finishes the
  // tree without it.
  void Declined() {
    Flight& f = *flight;
    f.draft.reset();
    f.proposer->Declined(f.rs, f.limits, &f.tree);
  }

  // The draft of flight->draft is in flight->tree: the proposer finishes the tree.
  void Drafted(const DraftCall& call) {
    Flight& f = *flight;
    f.draft.reset();
    f.proposer->Drafted(f.rs, f.limits, call, &f.tree);
  }

  // After the target pass that held flight->tree from batch row `row0`: greedy or
  // stochastic verification, learning, the commit, and the emitted tokens streamed.
  // Returns false when the generation is over.
  bool FinishStep(int32_t row0, double pass_ms);

  // The request's result (stats completed, output learned); the engine is free again.
  GenerateResult Finish() {
    Flight& f = *flight;
    GenerationStats& st = f.result.stats;
    st.n_generated = static_cast<int32_t>(f.result.tokens.size());
    if (f.decoding) st.t_decode_ms = PhaseMs(f) - f.rs.lazy_prefill_ms;
    else st.t_prefill_ms += PhaseMs(f);
    if (f.o.learn && !f.result.tokens.empty()) history.AddOutput(f.result.tokens);
    GenerateResult out = std::move(f.result);
    flight.reset();
    return out;
  }

  // After a failure mid-request: the lane is emptied (its cache state is unknown).
  void Abort() {
    tctx->Truncate(0, lane);
    tctx_tokens.clear();
    if (dctx) {
      drafter->Abandon();
      dctx->Truncate(0, lane);
    }
    flight.reset();
  }
};

namespace {

// `context`: the request's tokens when the pass ran (prompt + emitted).
void CountProposals(const TokenTree& tree, const VerifyResult& vr, int64_t context, GenerationStats* st) {
  ++st->n_passes;
  GenerationStats::CountPass(&st->pass_rows, tree.size());
  st->pass_context += static_cast<double>(context);
  st->pass_row_context += static_cast<double>(context) * tree.size();
  st->nodes_verified += tree.size();
  for (int32_t i = 1; i < tree.size(); ++i) {
    ++st->per_source[static_cast<int>(tree.source[i])].proposed;
    (tree.source[i] == Source::kDraft ? st->n_drafted : st->n_grafted)++;
  }
  for (size_t i = 1; i < vr.accepted.size(); ++i) ++st->per_source[static_cast<int>(tree.source[vr.accepted[i]])].accepted;
  st->n_accepted += vr.num_accepted_proposals();
}

// Appends `emitted` to the request, cut at end-of-generation or the length limit,
// and streams it. Returns false when generation is over.
bool Emit(RequestState& rs, const std::vector<Token>& emitted, const Model& target, GenerateResult* out) {
  GenerationStats& st = *rs.stats;
  rs.committed.insert(rs.committed.end(), emitted.begin(), emitted.end());
  std::vector<Token> kept;
  bool more = true;
  for (Token t : emitted) {
    if (target.IsEog(t)) {
      st.stop_reason = "eog";
      more = false;
      break;
    }
    kept.push_back(t);
    if (++rs.generated >= rs.request.n_predict) {
      more = false;
      break;
    }
  }
  out->tokens.insert(out->tokens.end(), kept.begin(), kept.end());
  if (rs.request.on_tokens && !kept.empty() && !rs.request.on_tokens(kept)) {
    st.stop_reason = "cancelled";
    more = false;
  }
  return more;
}

}  // namespace

bool Engine::State::FinishStep(int32_t row0, double pass_ms) {
  Flight& f = *flight;
  GenerationStats& st = f.result.stats;
  st.t_verify_ms += pass_ms;
  const TokenTree& tree = f.tree;
  const auto logits = [&](int32_t node) { return tctx->Logits(row0 + node); };
  const Context::LazyReads reads_before = tctx->lazy_reads();
  if (cost && tctx->lazy_pass()) {
    // Always set: it replaces what another lane of the same pass hinted.
    std::vector<int32_t> rows = ReadAheadNodes(tree.parent, PathAcceptance(tree, calibration), *cost);
    for (int32_t& r : rows) r += row0;
    tctx->HintReads(rows);
  }
  VerifyResult vr;
  {
    ScopedMs t(&st.t_verify_ms);
    const int32_t nv = target.n_vocab();
    if (f.req.sampling.temperature <= 0.0f) {
      vr = VerifyGreedy(tree, [&](int32_t node) { return Argmax(logits(node), nv); });
    } else {
      // The output position of the token after the root: the same position gets the same
      // uniform in every pass and method (PositionSampler).
      const int64_t position = static_cast<int64_t>(f.rs.committed.size() - f.req.prompt.size());
      vr = VerifyStochastic(
          tree, [&](int32_t node) { return MakeDistribution(logits(node), nv, f.req.sampling); }, f.sampler,
          position);
    }
  }
  {
    // The rows after the root this pass computed (the root's is priced with the pass):
    // a block costs its first row read alone and the rest read ahead, and the root is
    // read alone or first in its block (ReadAheadNodes).
    const Context::LazyReads now = tctx->lazy_reads();
    const int64_t alone = now.alone - reads_before.alone, in_blocks = now.in_blocks - reads_before.in_blocks,
                  blocks = now.blocks - reads_before.blocks;
    f.rs.step_rows_read = std::max<int64_t>(0, alone + blocks - 1);
    st.rows_read += f.rs.step_rows_read;
    st.rows_read_ahead += in_blocks - blocks;
    f.rs.step_read_products.assign(now.products.size(), 0);
    if (blocks > 0) {
      if (st.read_products.size() < now.products.size()) st.read_products.resize(now.products.size(), 0);
      for (size_t c = 2; c < now.products.size(); ++c) {
        f.rs.step_read_products[c] = now.products[c] - reads_before.products[c];
        st.read_products[c] += f.rs.step_read_products[c];
      }
    }
  }
  std::vector<Token> emitted;
  {
    ScopedMs t(&st.t_commit_ms);
    CountProposals(tree, vr, static_cast<int64_t>(f.rs.committed.size()), &st);
    if (f.o.learn) {
      RecordOutcome(tree, vr, &calibration);
      f.proposer->Learn(f.rs, tree, vr, logits);
    }
    tctx->CommitPath(vr.accepted, lane);
    for (int32_t node : vr.accepted) tctx_tokens.push_back(tree.token[node]);
    emitted = vr.CommittedTokens(tree);
    f.proposer->Commit(f.rs, vr, emitted);
  }
  return Emit(f.rs, emitted, target, &f.result);
}

namespace {

// Saves what `engines` learnt to their learned-state file: the prior they all loaded
// once, plus each one's own outcomes since (counts only grow: nothing decays them).
bool SaveLearnedOf(const std::vector<const EngineState*>& engines) {
  const EngineState& first = *engines.front();
  if (first.config.learned_state.empty()) return false;
  CalibrationCounts total = first.calibration.Counts();
  const CalibrationCounts& prior = first.learned_prior;  // empty when it started cold
  auto add = [](std::vector<double>& to, const std::vector<double>& x, const std::vector<double>& p) {
    for (size_t i = 0; i < to.size(); ++i) to[i] += std::max(0.0, x[i] - (p.empty() ? 0.0 : p[i]));
  };
  for (size_t k = 1; k < engines.size(); ++k) {
    const CalibrationCounts c = engines[k]->calibration.Counts();
    add(total.trials, c.trials, prior.trials);
    add(total.accepts, c.accepts, prior.accepts);
    add(total.confidence, c.confidence, prior.confidence);
    add(total.source_accepts, c.source_accepts, prior.source_accepts);
  }
  for (size_t i = 0; i < total.trials.size(); ++i) total.accepts[i] = std::min(total.accepts[i], total.trials[i]);
  Calibration kept;
  kept.Restore(total);
  kept.CapTrials(kLearnedKeepTrials);
  SaveLearnedState(first.config.learned_state, {LearnedStateKey(first.target, first.draft), kept.Counts(), ""});
  return true;
}

}  // namespace

bool Engine::SaveLearned() const { return SaveLearnedOf({s_.get()}); }

bool EngineGroup::SaveLearned() const {
  std::vector<const EngineState*> states;
  for (const auto& e : engines_) states.push_back(e->s_.get());
  return SaveLearnedOf(states);
}

Engine::Engine(const Model& target, const Model* draft, const EngineConfig& config)
    : Engine(target, draft, config, nullptr, nullptr, 0) {}

Engine::Engine(const Model& target, const Model* draft, const EngineConfig& config,
               std::shared_ptr<Context> shared_target, std::shared_ptr<Context> shared_draft, int32_t lane)
    : s_(std::make_unique<State>(target, draft, config)) {
  if (config.max_tree < 1) throw Error("tree budget must be at least 1");
  ContextOptions co;
  co.n_ctx = config.n_ctx;
  co.n_threads = config.n_threads;
  co.max_tree = config.max_tree;
  co.n_seq_max = std::clamp(config.max_tree, 1, 256);
  co.lazy_logits = config.lazy_logits;
  if (shared_target) {
    s_->tctx = std::move(shared_target);
    s_->lane = lane;
  } else {
    s_->tctx = std::make_shared<Context>(target, co);
  }
  if (draft != nullptr) {
    CheckDraftCompatible(target, *draft);
    if (shared_draft) {
      s_->dctx = std::move(shared_draft);
    } else {
      ContextOptions dco = co;
      dco.max_tree = 64;
      dco.n_seq_max = 128;
      dco.lazy_logits = false;  // a draft tree reads every row
      s_->dctx = std::make_shared<Context>(*draft, dco);
    }
    s_->drafter = std::make_unique<Drafter>(s_->dctx.get(), s_->lane);
  }
  if (!config.index_path.empty()) {
    s_->datastore = Datastore::Open(config.index_path, target.VocabFingerprint());
  }
}

Engine::~Engine() = default;

const Model& Engine::target() const { return s_->target; }
const Model* Engine::draft() const { return s_->draft; }
bool Engine::has_index() const { return s_->datastore != nullptr; }

void Engine::Validate(const DecodeOptions& o) const {
  if (MethodNeedsDraft(o.method) && s_->draft == nullptr) {
    throw Error("method " + MethodName(o.method) +
                " needs a draft model (-md); without one use ar, pld, suffix, rest or recycle");
  }
  if (o.method == Method::kRest && s_->datastore == nullptr) {
    throw Error("method rest needs a corpus datastore (--index PATH, built with `graft index build`)");
  }
  if (o.tree_budget < 1) throw Error("tree budget must be at least 1");
  if (o.tree_budget > s_->tctx->max_tree() || o.tree_budget > s_->tctx->n_seq_max()) {
    throw Error("tree budget " + std::to_string(o.tree_budget) + " exceeds this engine's limit of " +
                std::to_string(std::min(s_->tctx->max_tree(), s_->tctx->n_seq_max())) +
                " (the context's sequence limit)");
  }
  if (o.draft_max < 1 || o.draft_topk < 1 || o.draft_frontier < 1) {
    throw Error("draft depth, top-k and frontier must be at least 1");
  }
  constexpr double kBig = 1e9;  // "no limit" without admitting infinity
  CheckIn(o.draft_p_min, 0, 1, "the draft p-min");
  CheckIn(o.prune.min_accept_prob, 0, 1, "the prune p-min");
  CheckIn(o.skip_draft_gain, 0, kBig, "skip-draft-gain");
  CheckIn(o.max_loss, -kBig, kBig, "max-loss");
  CheckIn(o.loss_grant, 0, kBig, "loss-grant");
  CheckIn(o.loss_prefill, 0, 1, "loss-prefill");
  CheckIn(o.loss_sure_cap, 0, kBig, "loss-sure-cap");
}

double Engine::PrepareCostProfile() {
  double ms = 0;
  s_->Costs(&ms);
  return ms;
}

GenerateResult Engine::Generate(const GenerateRequest& req, const DecodeOptions& o) {
  Validate(o);
  State& s = *s_;
  GRAFT_CHECK(!s.flight, "an engine serves one request at a time");
  s.Start(req, o);
  try {
    // Prefill in chunks of n_batch, polling `cancelled` between them.
    for (TokenSpan left = s.PrefillLeft(); !left.empty(); left = s.PrefillLeft()) {
      const TokenSpan chunk = left.first(std::min<size_t>(left.size(), s.tctx->n_batch()));
      s.tctx->Prefill(chunk, false, s.lane);
      s.Prefilled(chunk);
      if (req.cancelled && req.cancelled()) {
        s.flight->result.stats.stop_reason = "cancelled";
        return s.Finish();
      }
    }
    s.BeginDecode();
    while (s.Propose({})) {
      if (s.flight->draft) s.DraftAlone();
      double pass_ms = 0;
      {
        ScopedMs t(&pass_ms);
        s.tctx->EvalTree(s.flight->tree, s.lane);
      }
      if (!s.FinishStep(0, pass_ms)) break;
    }
  } catch (...) {
    s.Abort();
    throw;
  }
  return s.Finish();
}

// ---------------------------------------------------------------- EngineGroup

EngineGroup::EngineGroup(const Model& target, const Model* draft, const EngineConfig& config,
                         const EngineGroupOptions& options)
    : options_(options) {
  if (options.slots < 1) throw Error("an engine group needs at least one slot");
  if (options.prefill_chunk < 1) throw Error("the prefill chunk must be at least one token");
  if (config.max_tree < 1) throw Error("tree budget must be at least 1");
  const int32_t seq_per_lane = std::clamp(config.max_tree, 1, 256);
  if (static_cast<int64_t>(seq_per_lane) * options.slots > 256) {
    throw Error(std::to_string(options.slots) + " slots with trees of up to " + std::to_string(config.max_tree) +
                " nodes need " + std::to_string(seq_per_lane * options.slots) +
                " sequence ids; llama.cpp allows 256 (lower the slots or the tree limit)");
  }
  ContextOptions co;
  co.n_ctx = config.n_ctx;
  co.n_threads = config.n_threads;
  co.max_tree = config.max_tree;
  co.n_seq_max = seq_per_lane;
  co.n_lanes = options.slots;
  co.lazy_logits = config.lazy_logits;
  co.n_batch = std::max(co.n_batch, options.prefill_chunk + config.max_tree * options.slots);
  target_ctx_ = std::make_shared<Context>(target, co);
  if (draft != nullptr) {
    CheckDraftCompatible(target, *draft);
    // A lane per slot, each with as many sequence ids (frontier nodes per draft) as
    // llama.cpp's 256 leave, and rows for every slot's catch-up in one pass.
    ContextOptions dco = co;
    dco.max_tree = 64;
    dco.n_seq_max = std::min(128, 256 / options.slots);
    dco.lazy_logits = false;  // a draft tree reads every row
    dco.n_batch = std::max(512, Drafter::kMaxCatchUpRows * options.slots);
    draft_ctx_ = std::make_shared<Context>(*draft, dco);
  }
  // The learned state is read once (one warning for an unusable file) and every slot
  // starts from slot 0's copy of it.
  EngineConfig rest = config;
  rest.learned_state.clear();
  for (int32_t i = 0; i < options.slots; ++i) {
    engines_.push_back(
        std::unique_ptr<Engine>(new Engine(target, draft, i == 0 ? config : rest, target_ctx_, draft_ctx_, i)));
    if (i == 0) continue;
    EngineState& s = *engines_.back()->s_;
    const EngineState& first = *engines_.front()->s_;
    s.config.learned_state = config.learned_state;
    s.calibration = first.calibration;
    s.learned_prior = first.learned_prior;
  }
}

EngineGroup::~EngineGroup() = default;

bool EngineGroup::busy(int32_t slot) const { return engines_.at(slot)->s_->flight != nullptr; }

bool EngineGroup::idle() const {
  for (const auto& e : engines_) {
    if (e->s_->flight) return false;
  }
  return true;
}

void EngineGroup::Start(int32_t slot, GenerateRequest request, const DecodeOptions& options) {
  Engine& e = *engines_.at(slot);
  GRAFT_CHECK(!e.s_->flight, "slot " + std::to_string(slot) + " is busy");
  e.Validate(options);
  e.s_->Start(std::move(request), options);
}

int32_t EngineGroup::CachedPrefix(int32_t slot, std::span<const Token> prompt) const {
  const Engine::State& s = *engines_.at(slot)->s_;
  return s.flight ? 0 : s.CachedPrefix(prompt);
}

void EngineGroup::Fail(int32_t slot, const std::string& error, std::vector<Finished>* done) {
  Engine::State& s = *engines_[slot]->s_;
  GenerateResult partial = std::move(s.flight->result);
  partial.stats.n_generated = static_cast<int32_t>(partial.tokens.size());
  s.Abort();
  done->push_back({slot, std::move(partial), error});
}

void EngineGroup::DraftAll(const std::vector<int32_t>& slots, std::vector<Finished>* done) {
  if (slots.empty()) return;
  ScopedMs t(&draft_ms_);
  std::vector<DraftRequest> requests;
  std::vector<int32_t> request_slot;
  for (int32_t i : slots) {
    Engine::State& s = *engines_[i]->s_;
    try {
      PrefillDraftPrompt(s, s.flight->rs);  // alone: a long pass the others should not wait on twice
    } catch (const std::exception& e) {
      Fail(i, e.what(), done);
      continue;
    }
    requests.push_back({&s, &s.flight->rs, *s.flight->draft, &s.flight->tree});
    request_slot.push_back(i);
  }
  if (requests.empty()) return;
  std::vector<DraftCall> calls;
  try {
    calls = DraftShared(requests, &draft_passes_);
  } catch (const std::exception& e) {
    for (int32_t i : request_slot) Fail(i, e.what(), done);
    return;
  }
  for (size_t j = 0; j < calls.size(); ++j) {
    try {
      engines_[request_slot[j]]->s_->Drafted(calls[j]);
    } catch (const std::exception& e) {
      Fail(request_slot[j], e.what(), done);
    }
  }
}

double EngineGroup::PrepareCostProfile() {
  double ms = 0;
  for (auto& e : engines_) ms += e->PrepareCostProfile();
  return ms;
}

std::vector<EngineGroup::Finished> EngineGroup::Step() {
  using State = Engine::State;
  std::vector<Finished> done;
  const auto finish = [&](int32_t slot, const std::string& error) {
    State& s = *engines_[slot]->s_;
    if (error.empty()) {
      done.push_back({slot, s.Finish(), ""});
    } else {
      Fail(slot, error, &done);
    }
  };
  // Finishes slot `i` as cancelled when its request says stop; true if it did.
  const auto cancel = [&](int32_t i) {
    State& s = *engines_[i]->s_;
    const GenerateRequest& r = s.flight->req;
    if (!r.cancelled || !r.cancelled()) return false;
    s.flight->result.stats.stop_reason = "cancelled";
    finish(i, "");
    return true;
  };

  std::vector<int32_t> decoding, joining;
  for (int32_t i = 0; i < slots(); ++i) {
    State& s = *engines_[i]->s_;
    if (!s.flight || cancel(i)) continue;
    if (s.flight->decoding) {
      decoding.push_back(i);
    } else {
      joining.push_back(i);
    }
  }
  // Joining requests: prompt chunks, at most prefill_chunk tokens in all, the shortest
  // remaining prompt first (it minimises the mean time to first token), less an ageing
  // credit of prefill_chunk / 8 tokens per step spent joining, so that a stream of
  // short prompts on the other slots cannot starve a long one. A prompt whose rest
  // fits starts decoding at once: its last chunk and its first tree (rooted at the
  // prompt's last token) share this pass.
  const int64_t age_per_step = std::max(1, options_.prefill_chunk / 8);
  const auto rank = [&](int32_t i) {
    const State& s = *engines_[i]->s_;
    return static_cast<int64_t>(s.PrefillLeft().size()) - age_per_step * s.flight->joining_steps;
  };
  for (int32_t i : joining) ++engines_[i]->s_->flight->joining_steps;
  std::stable_sort(joining.begin(), joining.end(), [&](int32_t a, int32_t b) { return rank(a) < rank(b); });
  std::vector<LaneWork> work;
  std::vector<int32_t> work_slot;
  std::vector<TokenSpan> last_chunk(slots());
  int32_t budget = options_.prefill_chunk;
  for (int32_t i : joining) {
    State& s = *engines_[i]->s_;
    const TokenSpan left = s.PrefillLeft();
    if (static_cast<int32_t>(left.size()) <= budget) {
      try {
        s.BeginDecode();
      } catch (const std::exception& e) {
        finish(i, e.what());
        continue;
      }
      budget -= static_cast<int32_t>(left.size());
      last_chunk[i] = left;
      decoding.push_back(i);
    } else if (budget > 0) {
      work.push_back({s.lane, left.first(budget), nullptr});
      work_slot.push_back(i);
      budget = 0;
    }
  }
  // Then one tree per decoding request, each sized against the rows already in the
  // pass and one root for every request still to propose. A request that drafts counts
  // its draft budget (or the rows its offer expects) until its tree is built (the
  // drafts run together, below).
  BatchLoad load;
  for (const LaneWork& w : work) load.rows += static_cast<int32_t>(w.prefill.size());
  for (int32_t i : decoding) load.rows += static_cast<int32_t>(last_chunk[i].size());
  BatchLoad rest = load;  // the pass without the drafting requests' trees
  std::vector<DraftOffer> required, offers;
  std::vector<int32_t> proposed, drafting, offering;
  for (size_t k = 0; k < decoding.size(); ++k) {
    const int32_t i = decoding[k];
    State& s = *engines_[i]->s_;
    const int32_t later = static_cast<int32_t>(decoding.size() - k - 1);
    const BatchLoad others = options_.load_aware ? BatchLoad{load.rows + later, load.tokens + later} : BatchLoad{};
    try {
      if (!s.Propose(others, static_cast<int32_t>(last_chunk[i].size()))) {
        finish(i, "");
        continue;
      }
    } catch (const std::exception& e) {
      finish(i, e.what());
      continue;
    }
    proposed.push_back(i);
    if (s.flight->draft) {
      const DraftParams& dp = *s.flight->draft;
      const DraftOffer* offer = s.flight->proposer->offer();
      if (offer != nullptr) {
        offers.push_back(*offer);
        offering.push_back(i);
      } else {
        // Its passes and rows, as ChooseDrafts counts them; its tokens do not depend
        // on the choice (one counted).
        required.push_back({.rows_with = dp.budget,
                            .passes = dp.max_depth,
                            .catch_up = SharedCatchUp(s, s.flight->rs),
                            .level_rows = dp.frontier});
        rest.tokens += 1.0;
      }
      load.rows += offer != nullptr ? offer->rows_with : dp.budget;
      load.tokens += 1.0;
    } else {
      const double tokens = 1.0 + ExpectedAcceptedLength(s.flight->tree, s.calibration);
      load.rows += s.flight->tree.size();
      load.tokens += tokens;
      rest.rows += s.flight->tree.size();
      rest.tokens += tokens;
    }
  }
  // Drafts offered under load (graft's adaptive policy) run only when they raise the
  // step's expected tokens per ms, counting the draft passes every request waits for.
  if (!offers.empty()) {
    const CostModel& cost = *engines_[offering[0]]->s_->cost;  // every slot has the same profile
    const std::vector<bool> take = ChooseDrafts(cost, rest, required, offers);
    for (size_t j = 0; j < offering.size(); ++j) {
      if (take[j]) continue;
      try {
        engines_[offering[j]]->s_->Declined();
      } catch (const std::exception& e) {
        finish(offering[j], e.what());
      }
    }
  }
  for (int32_t i : proposed) {
    const State& s = *engines_[i]->s_;
    if (s.flight && s.flight->draft) drafting.push_back(i);
  }
  if (options_.share_draft_passes) {
    DraftAll(drafting, &done);
  } else {
    for (int32_t i : drafting) DraftAll({i}, &done);
  }
  for (int32_t i : proposed) {
    State& s = *engines_[i]->s_;
    if (!s.flight) continue;  // its draft failed
    work.push_back({s.lane, last_chunk[i], &s.flight->tree});
    work_slot.push_back(i);
  }
  if (work.empty()) return done;

  std::vector<int32_t> rows;
  double pass_ms = 0;
  try {
    ScopedMs t(&pass_ms);
    rows = target_ctx_->EvalLanes(work);
  } catch (const std::exception& e) {
    for (int32_t i : work_slot) finish(i, e.what());
    return done;
  }
  target_pass_ms_ += pass_ms;
  for (size_t w = 0; w < work.size(); ++w) {
    const int32_t i = work_slot[w];
    State& s = *engines_[i]->s_;
    try {
      s.Prefilled(work[w].prefill);
      if (rows[w] < 0) {
        cancel(i);
        continue;
      }
      if (!s.FinishStep(rows[w], pass_ms)) finish(i, "");
    } catch (const std::exception& e) {
      finish(i, e.what());
    }
  }
  return done;
}

}  // namespace graft
