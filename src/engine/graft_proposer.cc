// `graft`: retrieve first; draft a calibrated, pruned tree only when retrieval alone
// does not promise enough and drafting pays on this machine (DraftGate); retrieve
// again under the best kept nodes and graft into the freed slots; then keep the tree
// size that maximises expected tokens per ms under the cached cost profile.
#include <algorithm>

#include "engine/proposer.h"
#include "graft/prune.h"
#include "graft/shadow.h"

namespace graft {
namespace {

class GraftProposer final : public Proposer {
 public:
  explicit GraftProposer(EngineState& es) : es_(es) {}

  void Begin(RequestState& rs) override {
    es_.request.Reset(rs.request.prompt);
    cost_.reset();
    if (rs.options.adaptive) cost_ = es_.Costs(&rs.stats->t_calibrate_ms);
    shadow_.Clear();
    cut_ = TokenTree{};  // a request that ended between Propose and Learn staged one
    loss_.Begin(LossBudgetOptions{.allowance = rs.options.max_loss,
                                  .grant = rs.options.loss_grant,
                                  .prefill_share = rs.options.loss_prefill,
                                  .sure_cap = rs.options.loss_sure_cap},
                cost_ ? cost_->PrefillMs(static_cast<int64_t>(rs.request.prompt.size())) : 0.0);
  }

  std::optional<DraftParams> Propose(RequestState& rs, const StepLimits& limits, TokenTree* tree) override {
    const DecodeOptions& o = rs.options;
    drafted_ = false;
    draft_ms_ = 0;
    draft_step_ms_ = 0;
    offered_ = false;
    alone_ = limits.load.rows == 0;
    // This step's passes are priced at the request's length (ContextCost): a row
    // reads every cached token, so trees over long prompts cost more.
    if (cost_) cost_->SetContext(static_cast<int32_t>(rs.committed.size()));
    bool skip_draft = false;
    // Retrieve first: when the request, history and corpus indexes already promise
    // enough, or when drafting has not paid lately, the draft model sits this step out.
    if (o.skip_draft_gain > 0 || cost_.has_value()) {
      Retrieve(rs, limits, *tree, {0}, limits.budget - 1);
      GraftRetrieved(rs, limits, tree);
      skip_draft = (cost_.has_value() && !GateDrafts(rs, limits)) ||
                   (o.skip_draft_gain > 0 && ExpectedAcceptedLength(*tree, es_.calibration) >= o.skip_draft_gain);
    }
    if (!skip_draft) {
      // A calibrated draft tree, pruned in Drafted, no deeper than the depth at which
      // the gate found that drafting pays: deeper levels cost passes it did not price.
      DraftParams dp = DraftParamsFor(rs.options, limits, &es_.calibration);
      DraftGate::Plan plan;
      if (cost_.has_value() && dp.max_depth >= 1) {
        plan = DraftGate::BestPlan(*cost_, gate_.decision_accept(), dp.max_depth, dp.frontier);
        dp.max_depth = std::max(1, plan.depth);
      }
      if (dp.max_depth >= 1) {
        // Under load (other requests in the same pass, EngineGroup) the draft passes
        // delay every request in the step, so the draft is only offered: the group
        // takes it when the whole step gains (ChooseDrafts), else Declined keeps the
        // retrieval-only tree built here.
        if (cost_.has_value() && limits.load.rows > 0) Offer(rs, limits, dp, plan, tree);
        tree->Reset(tree->token[0]);
        return dp;
      }
      tree->Reset(tree->token[0]);
      GraftUnder(rs, limits, tree);
    }
    Done(rs, limits, tree);
    return {};
  }

  const DraftOffer* offer() const override { return offered_ ? &offer_ : nullptr; }

  void Declined(RequestState& rs, const StepLimits&, TokenTree* tree) override {
    ++rs.stats->n_draft_declined;
    *tree = std::move(fallback_);
    tree_size_ = tree->size();
    offered_ = false;
  }

  void Drafted(RequestState& rs, const StepLimits& limits, const DraftCall& call, TokenTree* tree) override {
    drafted_ = true;
    // Modelled cost: the catch-up pass over the tokens the draft cache lacked, then
    // one pass per level over at most `frontier` rows.
    if (cost_.has_value()) {
      const double levels_ms = (call.passes - 1) * cost_->DraftMs(call.params.frontier);
      draft_ms_ = cost_->DraftMs(call.catch_up) + levels_ms;
      // The gate weighs the prompt prefill on its own (DraftCatchUpMs): its measured
      // rate sees a step's catch-up only up to a tree's tokens, as a step makes it.
      draft_step_ms_ = cost_->DraftMs(std::min(call.catch_up, limits.budget + 1)) + levels_ms;
    }
    {
      ScopedMs t(&rs.stats->t_draft_ms);
      PruneDraft(es_, rs.options, call.params.max_depth, tree);
    }
    GraftUnder(rs, limits, tree);
    Done(rs, limits, tree);
  }

  void Learn(RequestState& rs, const TokenTree& tree, const VerifyResult& vr,
             const std::function<const float*(int32_t)>& logits) override {
    LearnNextTokens(es_, tree, vr, logits);
    if (drafted_ && cost_.has_value()) ObserveDraftLevels(tree, vr);
    if (!cut_.token.empty()) shadow_.Add(std::move(cut_), cut_kept_);
    cut_ = TokenTree{};
    shadow_.Commit(vr.CommittedTokens(tree), &es_.calibration);
  }

  void Commit(RequestState& rs, const VerifyResult& vr, const std::vector<Token>& emitted) override {
    if (drafted_) es_.drafter->Commit(vr.accepted);
    es_.request.Append(emitted);
    // The gate sees the modelled cost of the step, not its wall time: deterministic.
    // Only a pass of its own tells what retrieval alone costs: a tree sized against
    // other rows in the pass (other requests, its own prompt's last chunk) is larger
    // than it would be alone, and its stand-alone cost would make retrieval look slow
    // and turn the draft on where it cannot pay.
    // A lazy pass also read the logits of its accepted rows, and some rows ahead of
    // need (CostModel::ReadsMs).
    const double read_ms = cost_.has_value() ? cost_->ReadsMs(rs.step_rows_read, rs.step_read_products) : 0;
    if (cost_.has_value() && alone_) {
      const int32_t tokens = static_cast<int32_t>(emitted.size());
      const double pass_ms = cost_->VerifyMs(tree_size_) + read_ms;
      if (drafted_) {
        gate_.ObserveDrafted(tokens, draft_step_ms_ + pass_ms);
      } else {
        gate_.ObserveRetrieval(tokens, pass_ms);
      }
    }
    if (cost_.has_value()) {
      loss_.Observe(draft_ms_ + cost_->VerifyMs(load_rows_ + tree_size_) + read_ms, cost_->VerifyMs(load_rows_ + 1),
                    static_cast<int32_t>(emitted.size()));
    }
  }

 private:
  // Whether the gate runs the draft model this step (DraftGate: the draft's modelled
  // rate, its catch-up on the tokens its cache lacks, the tokens left to emit).
  bool GateDrafts(const RequestState& rs, const StepLimits& limits) {
    return gate_.ShouldDraft(*cost_, std::min(rs.options.draft_max, limits.max_depth), rs.options.draft_frontier,
                             DraftCatchUp(es_, rs), rs.request.n_predict - rs.generated);
  }

  // The offer of a draft under load: the retrieval-only tree in `tree`, at its best
  // size, kept for Declined; the draft's side is the gate's chain model (`plan`) at
  // the acceptance its decision assumed.
  void Offer(RequestState& rs, const StepLimits& limits, const DraftParams& dp, const DraftGate::Plan& plan,
             TokenTree* tree) {
    Done(rs, limits, tree);
    fallback_ = *tree;
    offer_ = DraftOffer{.tokens_with = plan.tokens,
                        .tokens_without = 1.0 + ExpectedAcceptedLength(fallback_, es_.calibration),
                        .rows_with = plan.depth + 1,
                        .rows_without = fallback_.size(),
                        .passes = std::max(1, plan.depth),
                        .catch_up = SharedCatchUp(es_, rs),
                        .level_rows = dp.frontier};
    offered_ = true;
  }

  // Tells the gate how the draft's levels fared: along the accepted path, each node
  // with a drafted child is a tested level, accepted when the path goes on through one.
  void ObserveDraftLevels(const TokenTree& tree, const VerifyResult& vr) {
    std::vector<uint8_t> has_draft_child(tree.size(), 0);
    for (int32_t i = 1; i < tree.size(); ++i) {
      if (tree.source[i] == Source::kDraft) has_draft_child[tree.parent[i]] = 1;
    }
    int32_t levels = 0, accepted = 0;
    for (size_t k = 0; k < vr.accepted.size(); ++k) {
      if (!has_draft_child[vr.accepted[k]]) continue;
      ++levels;
      if (k + 1 < vr.accepted.size() && tree.source[vr.accepted[k + 1]] == Source::kDraft) ++accepted;
    }
    gate_.ObserveDraft(levels, accepted);
  }

  // Queries every retrieval source under each of `nodes` for `slots` candidates.
  void Retrieve(RequestState& rs, const StepLimits& limits, const TokenTree& tree, const std::vector<int32_t>& nodes,
                int32_t slots) {
    if (slots < 1) return;
    ScopedMs t(&rs.stats->t_retrieve_ms);
    for (int32_t n : nodes) {
      query_.Query(es_.request, rs.committed, tree, n, slots);
      if (es_.datastore) query_.Query(*es_.datastore, rs.committed, tree, n, slots);
      query_.Query(es_.recycle, rs.committed, tree, n, slots);
    }
  }

  void GraftRetrieved(RequestState& rs, const StepLimits& limits, TokenTree* tree) {
    ScopedMs t(&rs.stats->t_graft_ms);
    query_.GraftInto(tree, limits.budget, limits.max_depth, rs.options.prune.min_accept_prob, es_.calibration);
  }

  // Retrieval under the root and the best kept nodes, grafted into the free slots.
  void GraftUnder(RequestState& rs, const StepLimits& limits, TokenTree* tree) {
    Retrieve(rs, limits, *tree, BestNodes(*tree, rs.options.retrieve_nodes), limits.budget - tree->size());
    GraftRetrieved(rs, limits, tree);
  }

  // The tree is complete: its size, as the cost model would have it.
  void Done(RequestState& rs, const StepLimits& limits, TokenTree* tree) {
    if (cost_.has_value()) KeepBestSize(rs, limits, tree);
    tree_size_ = tree->size();
    load_rows_ = limits.load.rows;
  }

  // The root and the `n` kept nodes most likely to be accepted, most likely first.
  std::vector<int32_t> BestNodes(const TokenTree& tree, int32_t n) const {
    const std::vector<double> acc = PathAcceptance(tree, es_.calibration);
    std::vector<int32_t> nodes(tree.size());
    for (int32_t i = 0; i < tree.size(); ++i) nodes[i] = i;
    std::stable_sort(nodes.begin() + 1, nodes.end(), [&](int32_t x, int32_t y) { return acc[x] > acc[y]; });
    nodes.resize(std::min<size_t>(nodes.size(), 1 + n));
    return nodes;
  }

  // Adds retrieval candidates under the best nodes, however unlikely, until the tree
  // holds `size` nodes (or the sources run dry). Timed by the caller. O(queries).
  void Fill(RequestState& rs, const StepLimits& limits, int32_t size, TokenTree* tree) {
    Retrieve(rs, limits, *tree, BestNodes(*tree, rs.options.retrieve_nodes), size - tree->size());
    query_.GraftInto(tree, size, limits.max_depth, 0.0f, es_.calibration);
  }

  // Keeps the tree size that maximises expected tokens per ms of this step.
  void KeepBestSize(RequestState& rs, const StepLimits& limits, TokenTree* tree) {
    cut_ = TokenTree{};  // the cut of the last tree sized is the verified tree's
    if (tree->size() <= 1) return;
    ScopedMs t(&rs.stats->t_graft_ms);
    const std::vector<double> acc = PathAcceptance(*tree, es_.calibration);
    std::vector<double> sorted(acc.begin() + 1, acc.end());
    std::stable_sort(sorted.begin(), sorted.end(), std::greater<>());
    // A retrieval-only tree bets no more than the request can afford to lose (LossBudget);
    // a drafted one was paid for when DraftGate chose to draft.
    const int32_t max_n =
        drafted_ ? limits.budget
                 : loss_.MaxRows(*cost_, limits.budget, limits.load.rows,
                                 SureFirstAcceptance(*tree, acc, es_.calibration, loss_.options().sure_trials));
    int32_t n_best = cost_->BestSize(sorted, draft_ms_, max_n, limits.load);
    // A larger pass that costs less (a full row block) is free room: fill it with the
    // next-best candidates, the ones retrieval held back below the acceptance floor.
    const int32_t pad = cost_->CheapestSizeFrom(n_best, limits.budget, limits.load.rows);
    if (pad > tree->size()) Fill(rs, limits, pad, tree);
    if (pad > n_best && tree->size() >= pad) n_best = pad;
    if (n_best >= tree->size()) return;
    PruneOptions keep;
    keep.min_accept_prob = 0.0f;
    keep.max_depth = 1 << 30;
    keep.max_nodes = n_best;
    TokenTree pruned = Prune(*tree, keep, es_.calibration, &cut_kept_);
    if (drafted_) es_.drafter->Remap(cut_kept_);
    // What was cut is still learnt from, as the output settles it (graft/shadow.h);
    // Learn hands it over once this tree is the one verified.
    if (rs.options.learn) cut_ = std::move(*tree);
    *tree = std::move(pruned);
  }

  EngineState& es_;
  std::optional<CostModel> cost_;  // the engine's, at this step's context; none = fixed budget (--fixed-budget)
  DraftGate gate_;                    // lives for the engine: learns across requests
  Retrieval query_;
  LossBudget loss_;        // this request's modelled time beyond plain decoding, and what it may bet
  ShadowTrials shadow_;    // this request's cut candidates, learnt from as the output settles them
  TokenTree cut_;          // this step's tree before KeepBestSize cut it (empty: nothing cut)
  std::vector<int32_t> cut_kept_;  // the indices in cut_ of the nodes kept (Prune's kept_index)
  bool drafted_ = false;   // this step's tree came from the drafter: commit its cache
  double draft_ms_ = 0;    // modelled draft cost of this step
  double draft_step_ms_ = 0;  // the same with the catch-up capped at a tree's tokens (DraftGate::ObserveDrafted)
  bool alone_ = true;      // this step's pass holds no other rows (StepLimits::load)
  bool offered_ = false;   // this step's draft is an offer (offer_), its fallback tree in fallback_
  DraftOffer offer_;
  TokenTree fallback_;
  int32_t tree_size_ = 1;  // nodes verified this step
  int32_t load_rows_ = 0;  // rows of other requests in this step's pass
};

}  // namespace

std::unique_ptr<Proposer> MakeGraftProposer(EngineState& es) { return std::make_unique<GraftProposer>(es); }

}  // namespace graft
