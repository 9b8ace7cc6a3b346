// `oracle` (benchmarks only): proposes the recorded target continuation
// (GenerateRequest::oracle, ar's output) as a chain: the ceiling of what any proposer
// could get accepted under the same verification passes.
//
// Batched verification can resolve a near-tie differently from ar's one-row passes,
// after which the output is no longer the recording's. Proposing the recording's
// next tokens would then be wrong every step (the oracle fell below ar and graft beat
// it), so after a divergence the oracle re-aligns: it finds the output's last
// kMinAlign..kMaxAlign tokens in the recording and proposes what follows them there;
// when they occur nowhere it verifies the root alone, a plain-decoding step. It stays
// the exact ceiling up to the first divergence (results.json: first_divergence).
#include <algorithm>

#include "engine/proposer.h"

namespace graft {
namespace {

constexpr int64_t kMinAlign = 4;   // output tokens that must match to re-align
constexpr int64_t kMaxAlign = 32;  // longest tail tried

class OracleProposer final : public Proposer {
 public:
  explicit OracleProposer(EngineState& es) : es_(es) {}

  void Begin(RequestState& rs) override {
    matched_ = 0;
    diverged_ = false;
    // The ceiling verifies as graft does: with the cost profile, a lazy pass reads its
    // likeliest rows ahead (Engine's FinishStep, Context::HintReads).
    es_.Costs(&rs.stats->t_calibrate_ms);
  }

  std::optional<DraftParams> Propose(RequestState& rs, const StepLimits& limits, TokenTree* tree) override {
    const std::vector<Token>& oracle = rs.request.oracle;
    const int64_t from = Align(rs);
    if (from < 0) return {};
    CandidateTrie trie;
    int32_t parent = -1;
    for (size_t i = from; i < oracle.size() && trie.size() < limits.budget - 1; ++i) {
      parent = trie.Add(parent, oracle[i], 1.0f);
    }
    Retrieval q;
    q.Add(std::move(trie), 0, Source::kOracle);
    ScopedMs t(&rs.stats->t_graft_ms);
    q.GraftInto(tree, limits.budget, limits.max_depth, 0.0f, calibration_);
    return {};
  }

 private:
  EngineState& es_;
  // Where the recording continues the output: its length while the output equals
  // the recording's start; after a divergence, the end of the longest tail match
  // nearest to that length; -1 when none. O(kMaxAlign x |oracle|) after a divergence.
  int64_t Align(const RequestState& rs) {
    const std::vector<Token>& oracle = rs.request.oracle;
    const std::span<const Token> out(rs.committed.data() + rs.request.prompt.size(),
                                     rs.committed.size() - rs.request.prompt.size());
    const int64_t n = static_cast<int64_t>(out.size());
    while (!diverged_ && matched_ < n) {
      if (matched_ >= static_cast<int64_t>(oracle.size()) || out[matched_] != oracle[matched_]) diverged_ = true;
      else ++matched_;
    }
    if (!diverged_) return n;
    for (int64_t len = std::min(kMaxAlign, n); len >= kMinAlign; --len) {
      const auto tail = out.subspan(n - len);
      int64_t best = -1;
      for (auto it = oracle.begin(); (it = std::search(it, oracle.end(), tail.begin(), tail.end())) != oracle.end(); ++it) {
        const int64_t end = (it - oracle.begin()) + len;
        if (best < 0 || std::abs(end - n) < std::abs(best - n)) best = end;
      }
      if (best >= 0) return best;
    }
    return -1;
  }

  Calibration calibration_;  // unused by a zero threshold; GraftMany wants one
  int64_t matched_ = 0;      // output tokens checked equal to the recording
  bool diverged_ = false;    // the output left the recording
};

}  // namespace

std::unique_ptr<Proposer> MakeOracleProposer(EngineState& es) { return std::make_unique<OracleProposer>(es); }

}  // namespace graft
