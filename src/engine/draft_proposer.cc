// Draft-model methods: `chain` (a linear draft, as llama.cpp's speculative decoding),
// `tree` (a dense EAGLE-2 style tree) and `pruned` (the tree drafted and pruned by
// calibrated acceptance, with dynamic depth).
#include "engine/proposer.h"

namespace graft {
namespace {

class DraftProposer final : public Proposer {
 public:
  DraftProposer(EngineState& es, Method method) : es_(es), method_(method) {}

  std::optional<DraftParams> Propose(RequestState& rs, const StepLimits& limits, TokenTree*) override {
    const DecodeOptions& o = rs.options;
    DraftParams dp = DraftParamsFor(o, limits, method_ == Method::kPruned ? &es_.calibration : nullptr);
    if (dp.max_depth < 1) return {};
    if (method_ == Method::kChain) {
      dp.topk = 1;
      dp.frontier = 1;
      dp.budget = std::min(limits.budget, dp.max_depth + 1);
    }
    return dp;
  }

  void Drafted(RequestState& rs, const StepLimits&, const DraftCall& call, TokenTree* tree) override {
    drafted_ = true;
    ScopedMs t(&rs.stats->t_draft_ms);
    if (method_ == Method::kChain && tree->size() - 1 < rs.options.draft_min) tree->Reset(tree->token[0]);
    if (method_ == Method::kPruned) PruneDraft(es_, rs.options, call.params.max_depth, tree);
  }

  void Commit(RequestState&, const VerifyResult& vr, const std::vector<Token>&) override {
    if (drafted_) es_.drafter->Commit(vr.accepted);
    drafted_ = false;
  }

 private:
  EngineState& es_;
  Method method_;
  bool drafted_ = false;  // the drafter holds this step's tree: commit its cache
};

}  // namespace

std::unique_ptr<Proposer> MakeDraftProposer(EngineState& es, Method method) {
  return std::make_unique<DraftProposer>(es, method);
}

}  // namespace graft
