#include "engine/cost_model.h"

#include <algorithm>

#include "graft/error.h"

namespace graft {

CostModel::CostModel(std::vector<double> verify_ms, std::vector<double> draft_ms)
    : verify_ms_(std::move(verify_ms)), draft_ms_(std::move(draft_ms)) {
  GRAFT_CHECK(verify_ms_.size() >= 2, "empty verify cost curve");
  for (size_t n = 1; n < verify_ms_.size(); ++n) GRAFT_CHECK(verify_ms_[n] > 0, "verify cost must be positive");
  for (size_t n = 1; n < draft_ms_.size(); ++n) GRAFT_CHECK(draft_ms_[n] > 0, "draft cost must be positive");
}

double CostModel::At(const std::vector<double>& ms, int32_t n) {
  const int32_t last = static_cast<int32_t>(ms.size()) - 1;
  if (n <= 1) return ms[1];
  if (n <= last) return ms[n];
  const int32_t from = std::max(1, last - 4);
  const double slope = last > from ? (ms[last] - ms[from]) / (last - from) : ms[last];
  return ms[last] + std::max(0.0, slope) * (n - last);
}

int32_t CostModel::BestSize(std::span<const double> a, double fixed_ms, int32_t max_n) const {
  const int32_t limit = std::min<int32_t>(static_cast<int32_t>(a.size()) + 1, max_n);
  double gain = 1.0;
  int32_t best = 1;
  double best_rate = gain / (fixed_ms + VerifyMs(1));
  for (int32_t n = 2; n <= limit; ++n) {
    gain += a[n - 2];
    const double rate = gain / (fixed_ms + VerifyMs(n));
    if (rate > best_rate) {
      best_rate = rate;
      best = n;
    }
  }
  return best;
}

bool DraftGate::ShouldDraft() {
  ++step_;
  if (seen_[1] < 2) return true;   // try drafting first (it is the usual winner on GPUs)
  if (seen_[0] < 2) return false;  // then without
  const bool best = rate_[1] >= rate_[0];
  // A clear loser (30% slower) is re-tried 4x less often: exploring costs a slow step.
  const double lo = std::min(rate_[0], rate_[1]), hi = std::max(rate_[0], rate_[1]);
  const int64_t period = lo < 0.7 * hi ? 4 * explore_every_ : explore_every_;
  return step_ % period == 0 ? !best : best;
}

void DraftGate::Observe(bool drafted, int32_t tokens, double ms) {
  if (!(ms > 0)) return;
  const int k = drafted ? 1 : 0;
  const double r = tokens / ms;
  rate_[k] = seen_[k] == 0 ? r : (1 - ema_) * rate_[k] + ema_ * r;
  ++seen_[k];
}

}  // namespace graft
