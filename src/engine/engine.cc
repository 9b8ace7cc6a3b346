// The decoding loop. Every method is a Proposer (proposer.h); one step is
//   propose -> verify (one target pass) -> learn -> commit -> emit.
#include "graft/engine.h"

#include <algorithm>
#include <map>

#include "engine/proposer.h"
#include "graft/cost_profile.h"
#include "graft/error.h"
#include "graft/verify.h"

namespace graft {

EngineState::EngineState(const Model& t, const Model* d, const EngineConfig& c)
    : target(t),
      draft(d),
      config(c),
      history(HistoryOptions{c.history_tokens, {}}),
      recycle(t.n_vocab()),
      calibration(CalibrationOptions{.source_scale_prior = 0.5}),
      request(RetrievalOptions{}, &history) {}

const CostModel& EngineState::Costs(double* calibrate_ms) {
  if (!cost) {
    CostProfileOptions po;
    po.n_threads = config.n_threads;
    po.max_rows = std::min(config.max_tree, 32);
    po.dir = config.profile_dir;
    double ms = 0;
    CostProfile p = LoadOrMeasureCostProfile(target, draft, po, &ms);
    *calibrate_ms += ms;
    cost.emplace(std::move(p.verify_ms), std::move(p.draft_ms));
  }
  return *cost;
}

struct Engine::State : EngineState {
  using EngineState::EngineState;
  std::map<Method, std::unique_ptr<Proposer>> proposers;  // created on first use

  Proposer& ProposerFor(Method m) {
    auto& p = proposers[m];
    if (!p) p = MakeProposer(*this, m);
    return *p;
  }

  // Prefills all but the last prompt token (the first root) into the target cache,
  // reusing a prefix shared with the previous request when config.reuse_prefix; the
  // draft cache is cut to the same common prefix and catches up lazily. Polls
  // `req.cancelled` between chunks of n_batch tokens; returns false when it said stop.
  bool PrefillPrompt(const GenerateRequest& req, GenerationStats* st) {
    ScopedMs t(&st->t_prefill_ms);
    const std::vector<Token>& prompt = req.prompt;
    size_t common = 0;
    if (config.reuse_prefix) {
      const size_t limit = std::min(tctx_tokens.size(), prompt.size() - 1);
      while (common < limit && tctx_tokens[common] == prompt[common]) ++common;
    }
    if (static_cast<int32_t>(common) < tctx->n_past()) tctx->Truncate(static_cast<int32_t>(common));
    if (dctx && static_cast<int32_t>(common) < dctx->n_past()) dctx->Truncate(static_cast<int32_t>(common));
    const size_t end = prompt.size() - 1;
    bool go_on = true;
    for (size_t from = tctx->n_past(); from < end && go_on; from = tctx->n_past()) {
      tctx->Prefill(TokenSpan(prompt).subspan(from, std::min<size_t>(tctx->n_batch(), end - from)), false);
      go_on = !(req.cancelled && req.cancelled());
    }
    tctx_tokens.assign(prompt.begin(), prompt.begin() + tctx->n_past());
    return go_on;
  }

  void CheckRequest(const GenerateRequest& req) const {
    if (req.prompt.empty()) throw Error("the prompt is empty");
    if (req.n_predict < 1) throw Error("n_predict must be at least 1");
    if (static_cast<int32_t>(req.prompt.size()) >= tctx->n_ctx()) {
      throw Error("prompt is " + std::to_string(req.prompt.size()) + " tokens but the context holds " +
                  std::to_string(tctx->n_ctx()) + " (raise -c or shorten the prompt)");
    }
  }

  // The step's limits, or nullopt when the context is full.
  std::optional<StepLimits> Limits(const DecodeOptions& o) const {
    const int32_t room = tctx->n_ctx() - tctx->n_past();
    if (room < 1) return std::nullopt;
    return StepLimits{std::max(1, std::min(o.tree_budget, room)), room - 1};
  }

  // One target pass over `tree`, then greedy or stochastic verification.
  VerifyResult Verify(const TokenTree& tree, const SamplingParams& sampling, Rng& rng, GenerationStats* st) {
    ScopedMs t(&st->t_verify_ms);
    tctx->EvalTree(tree);
    const int32_t nv = target.n_vocab();
    if (sampling.temperature <= 0.0f) {
      return VerifyGreedy(tree, [&](int32_t node) { return Argmax(tctx->Logits(node), nv); });
    }
    return VerifyStochastic(
        tree, [&](int32_t node) { return MakeDistribution(tctx->Logits(node), nv, sampling); }, rng);
  }

  // Commits the accepted path in the target cache; returns the step's tokens.
  std::vector<Token> CommitPath(const TokenTree& tree, const VerifyResult& vr) {
    tctx->CommitPath(vr.accepted);
    for (int32_t node : vr.accepted) tctx_tokens.push_back(tree.token[node]);
    return vr.CommittedTokens(tree);
  }
};

namespace {

void CountProposals(const TokenTree& tree, const VerifyResult& vr, GenerationStats* st) {
  ++st->n_passes;
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

Engine::Engine(const Model& target, const Model* draft, const EngineConfig& config)
    : s_(std::make_unique<State>(target, draft, config)) {
  if (config.max_tree < 1) throw Error("tree budget must be at least 1");
  ContextOptions co;
  co.n_ctx = config.n_ctx;
  co.n_threads = config.n_threads;
  co.max_tree = config.max_tree;
  co.n_seq_max = std::clamp(config.max_tree, 1, 256);
  s_->tctx = std::make_unique<Context>(target, co);
  if (draft != nullptr) {
    CheckDraftCompatible(target, *draft);
    ContextOptions dco = co;
    dco.max_tree = 64;
    dco.n_seq_max = 128;
    s_->dctx = std::make_unique<Context>(*draft, dco);
    s_->drafter = std::make_unique<Drafter>(s_->dctx.get());
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
}

double Engine::PrepareCostProfile() {
  double ms = 0;
  s_->Costs(&ms);
  return ms;
}

GenerateResult Engine::Generate(const GenerateRequest& req, const DecodeOptions& o) {
  Validate(o);
  State& s = *s_;
  s.CheckRequest(req);
  GenerateResult result;
  GenerationStats& st = result.stats;
  st.n_prompt = static_cast<int32_t>(req.prompt.size());
  st.stop_reason = "length";
  RequestState rs{req, o, req.prompt, 0, &st};
  if (!s.PrefillPrompt(req, &st)) {
    st.stop_reason = "cancelled";
    return result;
  }
  Proposer& proposer = s.ProposerFor(o.method);
  proposer.Begin(rs);

  double decode_ms = 0;
  {
    ScopedMs decode(&decode_ms);
    Rng rng(req.sampling.seed);
    TokenTree tree;
    const auto logits = [&](int32_t node) { return s.tctx->Logits(node); };
    for (bool more = true; more;) {
      const std::optional<StepLimits> limits = s.Limits(o);
      if (!limits) {
        st.stop_reason = "context";
        break;
      }
      tree.Reset(rs.committed.back());
      proposer.Propose(rs, *limits, &tree);
      const VerifyResult vr = s.Verify(tree, req.sampling, rng, &st);
      std::vector<Token> emitted;
      {
        ScopedMs t(&st.t_commit_ms);
        CountProposals(tree, vr, &st);
        if (o.learn) {
          RecordOutcome(tree, vr, &s.calibration);
          proposer.Learn(rs, tree, vr, logits);
        }
        emitted = s.CommitPath(tree, vr);
        proposer.Commit(rs, vr, emitted);
      }
      more = Emit(rs, emitted, s.target, &result);
    }
  }
  st.n_generated = static_cast<int32_t>(result.tokens.size());
  st.t_decode_ms = decode_ms - rs.lazy_prefill_ms;
  if (o.learn && !result.tokens.empty()) s.history.AddOutput(result.tokens);
  return result;
}

}  // namespace graft
