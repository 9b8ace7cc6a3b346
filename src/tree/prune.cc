// Prune: drop nodes whose calibrated path acceptance is below the exchange rate.
#include "graft/prune.h"

#include <algorithm>
#include <numeric>

namespace graft {

TokenTree Prune(const TokenTree& in, const PruneOptions& options, const Calibration& calibration,
                std::vector<int32_t>* kept_index) {
  const int32_t n = in.size();
  const std::vector<double> a = PathAcceptance(in, calibration);
  // keep[i]: node i passes the threshold and depth limit, and so does its parent.
  std::vector<char> keep(n, 0);
  int32_t n_kept = 0;
  if (n > 0) {
    keep[0] = 1;
    n_kept = 1;
  }
  for (int32_t i = 1; i < n; ++i) {
    keep[i] = keep[in.parent[i]] && in.depth[i] <= options.max_depth &&
              a[i] >= static_cast<double>(options.min_accept_prob);
    n_kept += keep[i];
  }
  if (options.max_nodes > 0 && n_kept > options.max_nodes) {
    std::vector<int32_t> order;
    order.reserve(n_kept);
    for (int32_t i = 0; i < n; ++i) {
      if (keep[i]) order.push_back(i);
    }
    // Highest a first, ties to the lower index: a parent (a >= child's, lower index)
    // always ranks before its child, so any prefix of `order` is a subtree.
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return a[x] > a[y]; });
    std::fill(keep.begin(), keep.end(), 0);
    for (int32_t r = 0; r < options.max_nodes; ++r) keep[order[r]] = 1;
    keep[0] = 1;
    // Safety net for estimates that are not monotone (e.g. a NaN): drop orphans.
    for (int32_t i = 1; i < n; ++i) keep[i] = keep[i] && keep[in.parent[i]];
  }

  TokenTree out;
  if (kept_index) kept_index->clear();
  if (n == 0) return out;
  out.Reset(in.token[0]);
  if (kept_index) kept_index->push_back(0);
  std::vector<int32_t> new_index(n, -1);
  new_index[0] = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (!keep[i]) continue;
    new_index[i] = out.Add(new_index[in.parent[i]], in.token[i], in.prob[i], in.source[i]);
    out.score.back() = in.score[i];  // keep the input's value bit for bit
    if (kept_index) kept_index->push_back(i);
  }
  return out;
}

}  // namespace graft
