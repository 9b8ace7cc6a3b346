// `oracle` (benchmarks only): proposes the recorded target continuation
// (GenerateRequest::oracle) as a chain, an upper bound for any proposer.
#include "engine/proposer.h"

namespace graft {
namespace {

class OracleProposer final : public Proposer {
 public:
  void Propose(RequestState& rs, const StepLimits& limits, TokenTree* tree) override {
    const std::vector<Token>& oracle = rs.request.oracle;
    CandidateTrie trie;
    int32_t parent = -1;
    for (size_t i = rs.generated; i < oracle.size() && trie.size() < limits.budget - 1; ++i) {
      parent = trie.Add(parent, oracle[i], 1.0f);
    }
    Retrieval q;
    q.Add(std::move(trie), 0, Source::kOracle);
    ScopedMs t(&rs.stats->t_graft_ms);
    q.GraftInto(tree, limits.budget, limits.max_depth, 0.0f, calibration_);
  }

 private:
  Calibration calibration_;  // unused by a zero threshold; GraftMany wants one
};

}  // namespace

std::unique_ptr<Proposer> MakeOracleProposer() { return std::make_unique<OracleProposer>(); }

}  // namespace graft
