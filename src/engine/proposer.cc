// Building blocks shared by the proposers, and the plain-decoding proposer.
#include "engine/proposer.h"

#include <algorithm>

#include "engine/topk.h"
#include "graft/prune.h"

namespace graft {
namespace {

constexpr int32_t kRecycleK = 8;      // top-k of verification logits fed to the table

// ar: the tree is the root alone, so each pass emits the target's next token.
class ArProposer final : public Proposer {
 public:
  std::optional<DraftParams> Propose(RequestState&, const StepLimits&, TokenTree*) override { return {}; }
};

}  // namespace

std::vector<Token> Retrieval::ContextFor(const std::vector<Token>& committed, const TokenTree& tree, int32_t node,
                                         int64_t tail) {
  const size_t from = tail > 0 && committed.size() > static_cast<size_t>(tail) ? committed.size() - tail : 0;
  std::vector<Token> ctx(committed.begin() + from, committed.end());
  const std::vector<Token> path = tree.PathTokens(node);
  ctx.insert(ctx.end(), path.begin() + 1, path.end());
  return ctx;
}

void Retrieval::Query(const RetrievalSource& src, const std::vector<Token>& committed, const TokenTree& tree,
                      int32_t node, int32_t nodes) {
  if (nodes < 1) return;
  CandidateTrie trie;
  src.Query(ContextFor(committed, tree, node, src.ContextTokens()), nodes, &trie);
  Add(std::move(trie), node, src.source());
}

void Retrieval::Add(CandidateTrie trie, int32_t node, Source source) {
  if (trie.empty()) return;
  tries_.push_back(std::move(trie));
  requests_.push_back({node, nullptr, source});
}

int32_t Retrieval::GraftInto(TokenTree* tree, int32_t budget, int32_t max_depth, float min_accept,
                             const Calibration& calibration) {
  if (requests_.empty()) return 0;
  for (size_t i = 0; i < requests_.size(); ++i) requests_[i].trie = &tries_[i];
  GraftOptions go;
  go.min_accept_prob = min_accept;
  go.max_depth = max_depth;
  const int32_t added = GraftMany(tree, requests_, budget, calibration, go);
  requests_.clear();
  tries_.clear();
  return added;
}

DraftParams DraftParamsFor(const DecodeOptions& o, const StepLimits& limits, const Calibration* calibration) {
  DraftParams dp;
  dp.max_depth = std::min(o.draft_max, limits.max_depth);
  dp.budget = limits.budget;
  dp.topk = o.draft_topk;
  dp.frontier = o.draft_frontier;
  dp.p_min = o.draft_p_min;
  dp.calibration = calibration;
  dp.min_accept = calibration != nullptr ? o.prune.min_accept_prob : 0.0f;
  return dp;
}

void PruneDraft(EngineState& es, const DecodeOptions& o, int32_t max_depth, TokenTree* tree) {
  PruneOptions po = o.prune;
  po.max_depth = std::min(po.max_depth, max_depth);
  std::vector<int32_t> kept;
  *tree = Prune(*tree, po, es.calibration, &kept);
  es.drafter->Remap(kept);
}

int32_t DraftCatchUp(const EngineState& es, const RequestState& rs) {
  const int32_t committed = static_cast<int32_t>(rs.committed.size());
  return committed - std::min(es.dctx->n_past(es.lane), committed - 1);
}

int32_t SharedCatchUp(const EngineState& es, const RequestState& rs) {
  return std::min(DraftCatchUp(es, rs), rs.generated + 1);
}

void PrefillDraftPrompt(EngineState& es, RequestState& rs) {
  GenerationStats& st = *rs.stats;
  const std::vector<Token>& prompt = rs.request.prompt;
  const int32_t prompt_end = static_cast<int32_t>(prompt.size()) - 1;
  const int32_t have = es.dctx->n_past(es.lane);
  if (have >= prompt_end) return;
  double ms = 0;
  {
    ScopedMs t(&ms);
    es.dctx->Prefill(TokenSpan(prompt).subspan(have, prompt_end - have), false, es.lane);
  }
  st.t_prefill_ms += ms;
  rs.lazy_prefill_ms += ms;
}

std::vector<DraftCall> DraftShared(const std::vector<DraftRequest>& requests, int64_t* passes) {
  std::vector<DraftJob> jobs;
  std::vector<DraftCall> calls;
  for (const DraftRequest& r : requests) {
    jobs.push_back({r.es->drafter.get(), &r.rs->committed, r.params, r.tree, &r.rs->stats->draft_pass_rows});
    calls.push_back({0, DraftCatchUp(*r.es, *r.rs), r.params});
  }
  double ms = 0;
  int32_t run = 0;
  {
    ScopedMs t(&ms);
    run = DraftTogether(jobs);
  }
  if (passes != nullptr) *passes += run;
  for (size_t j = 0; j < jobs.size(); ++j) {
    GenerationStats& st = *requests[j].rs->stats;
    st.t_draft_ms += ms;  // each request waited for every shared pass
    st.n_draft_passes += jobs[j].passes;
    ++st.n_draft_steps;
    calls[j].passes = jobs[j].passes;
  }
  return calls;
}

DraftCall DraftTree(EngineState& es, RequestState& rs, const DraftParams& params, TokenTree* tree) {
  PrefillDraftPrompt(es, rs);
  return DraftShared({{&es, &rs, params, tree}})[0];
}

void LearnNextTokens(EngineState& es, const TokenTree& tree, const VerifyResult& vr,
                     const std::function<const float*(int32_t)>& logits) {
  std::vector<std::pair<float, Token>> topk;
  std::vector<Token> tokens;
  std::vector<float> probs;
  for (int32_t node : vr.accepted) {
    TopKSoftmax(logits(node), es.target.n_vocab(), kRecycleK, &topk);
    tokens.clear();
    probs.clear();
    for (const auto& [p, t] : topk) {
      tokens.push_back(t);
      probs.push_back(p);
    }
    es.recycle.Update(tree.token[node], tokens, probs);
  }
}

std::unique_ptr<Proposer> MakeArProposer() { return std::make_unique<ArProposer>(); }

}  // namespace graft
