// Retrieval-only methods, one source each: `pld` (prompt lookup), `suffix` (this
// request's prompt and output plus earlier outputs), `rest` (the corpus datastore),
// `recycle` (the next-token table learned from verification logits).
#include "engine/proposer.h"

namespace graft {
namespace {

class RetrievalProposer final : public Proposer {
 public:
  RetrievalProposer(EngineState& es, Method method) : es_(es), method_(method) {}

  void Begin(RequestState& rs) override {
    if (method_ == Method::kSuffix) es_.request.Reset(rs.request.prompt);
  }

  std::optional<DraftParams> Propose(RequestState& rs, const StepLimits& limits, TokenTree* tree) override {
    Retrieval q;
    {
      ScopedMs t(&rs.stats->t_retrieve_ms);
      q.Query(Source(), rs.committed, *tree, 0, limits.budget - 1);
    }
    ScopedMs t(&rs.stats->t_graft_ms);
    q.GraftInto(tree, limits.budget, limits.max_depth, 0.0f, es_.calibration);
    return {};
  }

  void Learn(RequestState&, const TokenTree& tree, const VerifyResult& vr,
             const std::function<const float*(int32_t)>& logits) override {
    if (method_ == Method::kRecycle) LearnNextTokens(es_, tree, vr, logits);
  }

  void Commit(RequestState&, const VerifyResult&, const std::vector<Token>& emitted) override {
    if (method_ == Method::kSuffix) es_.request.Append(emitted);
  }

 private:
  const RetrievalSource& Source() const {
    switch (method_) {
      case Method::kPld: return es_.pld;
      case Method::kSuffix: return es_.request;
      case Method::kRest: return *es_.datastore;  // Engine::Validate checks it exists
      default: return es_.recycle;
    }
  }

  EngineState& es_;
  Method method_;
};

}  // namespace

std::unique_ptr<Proposer> MakeRetrievalProposer(EngineState& es, Method method) {
  return std::make_unique<RetrievalProposer>(es, method);
}

}  // namespace graft
