#include "engine/cost_model.h"

#include <algorithm>

#include "graft/error.h"

namespace graft {

namespace {
constexpr double kVerifyEma = 0.2;  // weight of a new observation of one size
}  // namespace

CostModel::CostModel(int32_t max_tree) : max_tree_(std::max(1, max_tree)), ms_(max_tree_ + 1, 0.0) {
  // Until calibrated: one unit per pass plus 0.4 per extra node (the shape of
  // the CPU curves measured here); only ratios matter for BestSize.
  for (int32_t n = 1; n <= max_tree_; ++n) ms_[n] = 1.0 + 0.4 * (n - 1);
}

void CostModel::SetVerifyCurve(std::vector<std::pair<int32_t, double>> points) {
  GRAFT_CHECK(!points.empty(), "empty cost curve");
  std::sort(points.begin(), points.end());
  for (int32_t n = 1; n <= max_tree_; ++n) {
    auto hi = std::lower_bound(points.begin(), points.end(), std::make_pair(n, -1.0));
    if (hi != points.end() && hi->first == n) {
      ms_[n] = hi->second;
    } else if (hi == points.begin()) {
      ms_[n] = hi->second * n / hi->first;
    } else if (hi == points.end()) {
      const auto& b = points.back();
      const double slope = points.size() >= 2
          ? (b.second - points[points.size() - 2].second) / (b.first - points[points.size() - 2].first)
          : b.second / b.first;
      ms_[n] = b.second + std::max(0.0, slope) * (n - b.first);
    } else {
      const auto& lo = *(hi - 1);
      const double t = static_cast<double>(n - lo.first) / (hi->first - lo.first);
      ms_[n] = lo.second + t * (hi->second - lo.second);
    }
  }
  calibrated_ = true;
}

void CostModel::ObserveVerify(int32_t n, double ms) {
  if (n < 1 || n > max_tree_ || !(ms > 0)) return;
  ms_[n] = (1 - kVerifyEma) * ms_[n] + kVerifyEma * ms;
}

double CostModel::VerifyMs(int32_t n) const { return ms_[std::clamp(n, 1, max_tree_)]; }

int32_t CostModel::BestSize(std::span<const double> a, double fixed_ms, int32_t max_n) const {
  const int32_t limit = std::min<int32_t>({static_cast<int32_t>(a.size()) + 1, max_n, max_tree_});
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

void DraftGate::Reset() {
  rate_[0] = rate_[1] = 0;
  seen_[0] = seen_[1] = 0;
  step_ = 0;
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
