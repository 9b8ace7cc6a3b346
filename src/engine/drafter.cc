#include "engine/drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/topk.h"
#include "graft/error.h"

namespace graft {
int32_t Drafter::Draft(const std::vector<Token>& committed, const DraftParams& params, TokenTree* tree) {
  GRAFT_CHECK(!committed.empty(), "nothing committed");
  const int32_t n_vocab = ctx_->model().n_vocab();
  int32_t passes = 0;
  // Catch up: the draft cache holds committed[0, n_past); decode the rest, root last.
  if (ctx_->n_past() >= static_cast<int32_t>(committed.size())) ctx_->Truncate(static_cast<int32_t>(committed.size()) - 1);
  const std::vector<Token> pending(committed.begin() + ctx_->n_past(), committed.end());
  const float* root_logits = ctx_->Prefill(pending, true);
  ++passes;
  const int32_t base = ctx_->n_past() - 1;  // position of the root

  // The dense draft tree `dt` grows level by level; `a` is the ranking key
  // (path score, or calibrated path acceptance in calibrated mode).
  TokenTree dt;
  dt.Reset(committed.back());
  std::vector<double> a = {1.0};
  std::vector<int32_t> dseq = {0};
  std::vector<std::pair<float, Token>> top;
  const bool calibrated = params.calibration != nullptr;
  auto add_children = [&](int32_t parent, const float* logits) {
    TopKSoftmax(logits, n_vocab, params.topk, &top);
    for (const auto& [q, tok] : top) {
      if (q <= 0.0f) continue;
      const int32_t c = dt.Add(parent, tok, q, Source::kDraft);
      const double edge = calibrated ? params.calibration->Estimate(Source::kDraft, q, dt.depth[c]) : q;
      a.push_back(a[parent] * edge);
      dseq.push_back(-1);
    }
  };
  add_children(0, root_logits);
  std::vector<int32_t> level;  // nodes of the newest level
  for (int32_t i = 1; i < dt.size(); ++i) level.push_back(i);

  const int32_t max_depth = std::min(params.max_depth, ctx_->n_ctx() - base - 2);
  int32_t next_seq = 1;
  for (int32_t depth = 1; depth < max_depth && !level.empty(); ++depth) {
    // Best `frontier` nodes of the newest level.
    std::stable_sort(level.begin(), level.end(), [&](int32_t x, int32_t y) { return a[x] > a[y]; });
    std::vector<int32_t> expand;
    for (int32_t v : level) {
      if (static_cast<int32_t>(expand.size()) >= params.frontier) break;
      if (a[v] < (calibrated ? params.min_accept : params.p_min)) break;
      if (next_seq + static_cast<int32_t>(expand.size()) >= ctx_->n_seq_max()) break;
      expand.push_back(v);
    }
    // Nothing in the expanded levels can rank into the budget: the N-1 best nodes
    // already beat every possible descendant (scores fall along a path).
    if (expand.empty()) break;
    if (params.budget >= 2 && dt.size() - 1 >= params.budget - 1) {
      std::vector<double> sorted(a.begin() + 1, a.end());
      std::nth_element(sorted.begin(), sorted.begin() + (params.budget - 2), sorted.end(), std::greater<>());
      if (a[expand[0]] < sorted[params.budget - 2]) break;
    }
    std::vector<BatchEntry> batch;
    for (int32_t v : expand) {
      const int32_t s = next_seq++;
      ctx_->SeqCopy(dseq[dt.parent[v]], s);
      dseq[v] = s;
      batch.push_back({dt.token[v], base + depth, {s}, true});
    }
    ctx_->Decode(batch);
    ++passes;
    level.clear();
    for (size_t j = 0; j < expand.size(); ++j) {
      const int32_t first_new = dt.size();
      add_children(expand[j], ctx_->Logits(static_cast<int32_t>(j)));
      for (int32_t c = first_new; c < dt.size(); ++c) level.push_back(c);
    }
  }

  // Rerank: the budget-1 best nodes by key (ties: shallower first, then index), which
  // is closed under parents because the key never grows along a path.
  std::vector<int32_t> order(dt.size() - 1);
  std::iota(order.begin(), order.end(), 1);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    if (a[x] != a[y]) return a[x] > a[y];
    return dt.depth[x] < dt.depth[y];
  });
  if (static_cast<int32_t>(order.size()) > params.budget - 1) order.resize(std::max(params.budget - 1, 0));
  std::sort(order.begin(), order.end());  // index order keeps parents before children
  std::vector<int32_t> new_of(dt.size(), -1);
  new_of[0] = 0;
  tree->Reset(committed.back());
  seq_.assign(1, 0);
  for (int32_t v : order) {
    const int32_t p = new_of[dt.parent[v]];
    GRAFT_CHECK(p >= 0, "rerank broke parent closure");
    new_of[v] = tree->Add(p, dt.token[v], dt.prob[v], Source::kDraft);
    seq_.push_back(dseq[v]);
  }
  return passes;
}

void Drafter::Remap(const std::vector<int32_t>& kept) {
  std::vector<int32_t> s(kept.size());
  for (size_t j = 0; j < kept.size(); ++j) s[j] = DraftSeq(kept[j]);
  seq_.swap(s);
}

void Drafter::Commit(const std::vector<int32_t>& accepted) {
  int32_t seq = 0, len = 0;
  for (size_t i = 1; i < accepted.size(); ++i) {
    const int32_t s = DraftSeq(accepted[i]);
    if (s < 0) break;
    seq = s;
    len = static_cast<int32_t>(i);
  }
  ctx_->CommitSequence(seq, len);
  seq_.clear();
}

}  // namespace graft
