#include "engine/drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/sequence_ops.h"
#include "engine/topk.h"
#include "graft/error.h"

namespace graft {

// The dense draft tree while it grows, level by level. `key` ranks nodes: the path
// score (product of draft probabilities) or, in calibrated mode, the calibrated path
// acceptance; either never grows along a path.
struct DenseTree {
  const DraftParams& params;
  int32_t n_vocab;
  TokenTree tree;
  std::vector<double> key;    // [nodes]
  std::vector<int32_t> seq;   // [nodes] draft sequence id holding the node, -1 = not decoded
  std::vector<int32_t> level; // nodes of the newest level
  std::vector<std::pair<float, Token>> top;  // scratch

  DenseTree(const DraftParams& p, int32_t nv, Token root) : params(p), n_vocab(nv), key{1.0}, seq{0} {
    tree.Reset(root);
  }

  // Gives `parent` its top-k children from its draft row (those under p_min dropped)
  // and makes them the newest level's members.
  void AddChildren(int32_t parent, const float* logits) {
    TopKSoftmax(logits, n_vocab, params.topk, &top);
    for (const auto& [q, tok] : top) {
      if (q <= 0.0f || q < params.p_min) continue;
      const int32_t c = tree.Add(parent, tok, q, Source::kDraft);
      const double edge = params.calibration ? params.calibration->Estimate(Source::kDraft, q, tree.depth[c]) : q;
      key.push_back(key[parent] * edge);
      seq.push_back(-1);
      level.push_back(c);
    }
  }

  // The newest level's best `frontier` nodes worth expanding (at most `seqs_left`), or
  // none when no descendant could still rank into the budget.
  std::vector<int32_t> Frontier(int32_t seqs_left) {
    std::stable_sort(level.begin(), level.end(), [&](int32_t x, int32_t y) { return key[x] > key[y]; });
    std::vector<int32_t> expand;
    for (int32_t v : level) {
      if (static_cast<int32_t>(expand.size()) >= std::min(params.frontier, seqs_left)) break;
      if (params.calibration && key[v] < params.min_accept) break;  // dynamic depth
      expand.push_back(v);
    }
    // The budget-1 best nodes already beat every possible descendant of the frontier.
    if (!expand.empty() && params.budget >= 2 && tree.size() - 1 >= params.budget - 1) {
      std::vector<double> sorted(key.begin() + 1, key.end());
      std::nth_element(sorted.begin(), sorted.begin() + (params.budget - 2), sorted.end(), std::greater<>());
      if (key[expand[0]] < sorted[params.budget - 2]) expand.clear();
    }
    return expand;
  }

  // The budget-1 best nodes by key (ties: shallower first, then index), closed under
  // parents because the key never grows along a path, in index order (parents first).
  // Writes them into `out` and their sequence ids into `out_seq`.
  void RerankInto(TokenTree* out, std::vector<int32_t>* out_seq) const {
    std::vector<int32_t> order(tree.size() - 1);
    std::iota(order.begin(), order.end(), 1);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      if (key[x] != key[y]) return key[x] > key[y];
      return tree.depth[x] < tree.depth[y];
    });
    if (static_cast<int32_t>(order.size()) > params.budget - 1) order.resize(std::max(params.budget - 1, 0));
    std::sort(order.begin(), order.end());
    std::vector<int32_t> new_of(tree.size(), -1);
    new_of[0] = 0;
    out->Reset(tree.token[0]);
    out_seq->assign(1, 0);
    for (int32_t v : order) {
      const int32_t p = new_of[tree.parent[v]];
      GRAFT_CHECK(p >= 0, "rerank broke parent closure");
      new_of[v] = out->Add(p, tree.token[v], tree.prob[v], Source::kDraft);
      out_seq->push_back(seq[v]);
    }
  }
};

Drafter::Drafter(Context* ctx, int32_t lane) : ctx_(ctx), lane_(lane) {}
Drafter::~Drafter() = default;

int32_t Drafter::Draft(const std::vector<Token>& committed, const DraftParams& params, TokenTree* tree,
                       std::vector<int32_t>* pass_rows) {
  std::vector<DraftJob> jobs{{this, &committed, params, tree, pass_rows}};
  return DraftTogether(jobs);
}

void Drafter::Start(const std::vector<Token>& committed, const DraftParams& params, std::vector<BatchEntry>* rows) {
  GRAFT_CHECK(!committed.empty(), "nothing committed");
  GRAFT_CHECK(!dense_, "a draft is already in progress");
  // Catch up: the draft cache holds committed[0, n_past); decode the rest, root last.
  const int32_t n = static_cast<int32_t>(committed.size());
  if (ctx_->n_past(lane_) >= n) ctx_->Truncate(n - 1, lane_);
  if (n - ctx_->n_past(lane_) > kMaxCatchUpRows) {
    const int32_t from = ctx_->n_past(lane_);
    ctx_->Prefill(TokenSpan(committed).subspan(from, n - kMaxCatchUpRows - from), false, lane_);
  }
  params_ = params;
  dense_ = std::make_unique<DenseTree>(params_, ctx_->model().n_vocab(), committed.back());
  const int32_t from = ctx_->n_past(lane_);
  catch_up_ = n - from;
  for (int32_t i = from; i < n; ++i) rows->push_back({committed[i], i, {0}, i == n - 1, lane_});
  base_ = n - 1;
  max_depth_ = std::min(params_.max_depth, ctx_->n_ctx() - base_ - 2);
  depth_ = 0;
  next_seq_ = 1;
  expand_.clear();
}

bool Drafter::Continue(int32_t row0, std::vector<BatchEntry>* rows) {
  GRAFT_CHECK(dense_, "no draft in progress");
  DenseTree& dense = *dense_;
  if (catch_up_ > 0) {
    SequenceOps::CommitSequence(*ctx_, 0, catch_up_, lane_);  // the catch-up joins the prefix
    dense.AddChildren(0, ctx_->Logits(row0 + catch_up_ - 1));
    catch_up_ = 0;
  } else {
    dense.level.clear();
    for (size_t j = 0; j < expand_.size(); ++j) {
      dense.AddChildren(expand_[j], ctx_->Logits(row0 + static_cast<int32_t>(j)));
    }
  }
  // Expand level by level: each frontier node decodes in a fresh sequence id that
  // first copies its parent's, so it attends to exactly the prefix and its ancestors.
  if (++depth_ >= max_depth_) return false;
  expand_ = dense.Frontier(ctx_->n_seq_max() - next_seq_);
  if (expand_.empty()) return false;
  for (int32_t v : expand_) {
    const int32_t s = next_seq_++;
    SequenceOps::SeqCopy(*ctx_, dense.seq[dense.tree.parent[v]], s, lane_);
    dense.seq[v] = s;
    rows->push_back({dense.tree.token[v], base_ + depth_, {s}, true, lane_});
  }
  return true;
}

void Drafter::Abandon() {
  dense_.reset();
  seq_.clear();
  expand_.clear();
  catch_up_ = 0;
}

void Drafter::Finish(TokenTree* tree) {
  GRAFT_CHECK(dense_, "no draft in progress");
  dense_->RerankInto(tree, &seq_);
  dense_.reset();
}

int32_t DraftTogether(std::vector<DraftJob>& jobs) {
  if (jobs.empty()) return 0;
  Context& ctx = jobs[0].drafter->context();
  for (const DraftJob& job : jobs) {
    GRAFT_CHECK(&job.drafter->context() == &ctx, "drafts drafted together share one context");
  }
  int32_t passes = 0;
  try {
    std::vector<BatchEntry> rows;
    std::vector<int32_t> row0(jobs.size()), live;
    for (size_t j = 0; j < jobs.size(); ++j) {
      jobs[j].passes = 0;
      row0[j] = static_cast<int32_t>(rows.size());
      jobs[j].drafter->Start(*jobs[j].committed, jobs[j].params, &rows);
      live.push_back(static_cast<int32_t>(j));
    }
    while (!live.empty()) {
      SequenceOps::Decode(ctx, rows);
      ++passes;
      // Each live job's rows run from its row0 to the next live job's.
      std::vector<BatchEntry> next;
      std::vector<int32_t> still;
      for (size_t k = 0; k < live.size(); ++k) {
        DraftJob& job = jobs[live[k]];
        const int32_t end = k + 1 < live.size() ? row0[live[k + 1]] : static_cast<int32_t>(rows.size());
        ++job.passes;
        if (job.pass_rows != nullptr) GenerationStats::CountPass(job.pass_rows, end - row0[live[k]]);
        const int32_t at = static_cast<int32_t>(next.size());
        if (job.drafter->Continue(row0[live[k]], &next)) {
          row0[live[k]] = at;
          still.push_back(live[k]);
        }
      }
      rows.swap(next);
      live.swap(still);
    }
  } catch (...) {
    for (DraftJob& job : jobs) job.drafter->Abandon();
    throw;
  }
  for (DraftJob& job : jobs) job.drafter->Finish(job.tree);
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
  SequenceOps::CommitSequence(*ctx_, seq, len, lane_);
  seq_.clear();
}

}  // namespace graft
