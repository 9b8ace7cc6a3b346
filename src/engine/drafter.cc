#include "engine/drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/sequence_ops.h"
#include "engine/topk.h"
#include "graft/error.h"

namespace graft {
namespace {

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

}  // namespace

int32_t Drafter::Draft(const std::vector<Token>& committed, const DraftParams& params, TokenTree* tree,
                       std::vector<int32_t>* pass_rows) {
  GRAFT_CHECK(!committed.empty(), "nothing committed");
  // Catch up: the draft cache holds committed[0, n_past); decode the rest, root last.
  if (ctx_->n_past() >= static_cast<int32_t>(committed.size())) ctx_->Truncate(static_cast<int32_t>(committed.size()) - 1);
  const std::vector<Token> pending(committed.begin() + ctx_->n_past(), committed.end());
  DenseTree dense(params, ctx_->model().n_vocab(), committed.back());
  dense.AddChildren(0, ctx_->Prefill(pending, true));
  int32_t passes = 1;
  if (pass_rows != nullptr) GenerationStats::CountPass(pass_rows, static_cast<int32_t>(pending.size()));
  const int32_t base = ctx_->n_past() - 1;  // position of the root

  // Expand level by level: each frontier node decodes in a fresh sequence id that
  // first copies its parent's, so it attends to exactly the prefix and its ancestors.
  const int32_t max_depth = std::min(params.max_depth, ctx_->n_ctx() - base - 2);
  int32_t next_seq = 1;
  for (int32_t depth = 1; depth < max_depth; ++depth) {
    const std::vector<int32_t> expand = dense.Frontier(ctx_->n_seq_max() - next_seq);
    if (expand.empty()) break;
    std::vector<BatchEntry> batch;
    for (int32_t v : expand) {
      const int32_t s = next_seq++;
      SequenceOps::SeqCopy(*ctx_, dense.seq[dense.tree.parent[v]], s);
      dense.seq[v] = s;
      batch.push_back({dense.tree.token[v], base + depth, {s}, true});
    }
    SequenceOps::Decode(*ctx_, batch);
    ++passes;
    if (pass_rows != nullptr) GenerationStats::CountPass(pass_rows, static_cast<int32_t>(batch.size()));
    dense.level.clear();
    for (size_t j = 0; j < expand.size(); ++j) dense.AddChildren(expand[j], ctx_->Logits(static_cast<int32_t>(j)));
  }
  dense.RerankInto(tree, &seq_);
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
  SequenceOps::CommitSequence(*ctx_, seq, len);
  seq_.clear();
}

}  // namespace graft
