// Draft-model drafting with tree attention in the draft's own context.
//
// The draft context's sequence 0 always holds a prefix of the committed tokens.
// Each step first catches up (decodes the committed tokens it lacks, the root last),
// then expands the tree level by level, EAGLE-2 style: the best `frontier` nodes of
// the newest level (by path score, or by calibrated acceptance when pruning) are
// decoded in one batch, each in a fresh sequence id that first copies its parent's
// sequence, so every node attends to exactly the prefix and its ancestors. After
// verification, Commit keeps the deepest accepted node that was decoded.
#pragma once

#include <cstdint>
#include <vector>

#include "graft/backend.h"
#include "graft/calibration.h"
#include "graft/engine.h"
#include "graft/tree.h"

namespace graft {

struct DraftParams {
  int32_t budget = 16;        // nodes in the returned tree, root included
  int32_t max_depth = 6;      // deepest level
  int32_t topk = 4;           // children per expanded node
  int32_t frontier = 4;       // nodes expanded per level
  // A child whose draft probability is below p_min is not proposed, so a chain stops
  // at the first token the draft is unsure of (llama.cpp's --draft-p-min). 0 = off.
  float p_min = 0.0f;
  // Calibrated mode (pruned / graft): frontier nodes are ranked and stopped by the
  // calibrated path acceptance a(node) instead of the raw score, nodes with
  // a < min_accept expand no further, and drafting stops when none is left
  // (dynamic depth). Null = dense tree.
  const Calibration* calibration = nullptr;
  float min_accept = 0.0f;
};

class Drafter {
 public:
  explicit Drafter(Context* ctx) : ctx_(ctx) {}

  // Builds a draft tree rooted at committed.back() into `tree` (Reset by the caller's
  // root). `committed` = all committed tokens, root last. Returns the number of draft
  // decode calls; `pass_rows`, when not null, counts each call by its rows (the
  // catch-up's tokens, then each level's frontier; see CountPass). After it,
  // DraftSeq(i) tells which tree nodes the draft decoded.
  int32_t Draft(const std::vector<Token>& committed, const DraftParams& params, TokenTree* tree,
                std::vector<int32_t>* pass_rows = nullptr);

  // Sequence id holding node i of the last Draft()'s tree in the draft cache, or -1
  // if node i was proposed but never decoded. Root = 0.
  int32_t DraftSeq(int32_t node) const { return node < static_cast<int32_t>(seq_.size()) ? seq_[node] : -1; }

  // Remaps node ids after the tree was pruned: new node j was old node kept[j].
  void Remap(const std::vector<int32_t>& kept);

  // After verification: `accepted` = accepted node ids, root first. Keeps the longest
  // accepted prefix that the draft decoded; the rest is caught up next step.
  void Commit(const std::vector<int32_t>& accepted);

 private:
  Context* ctx_;
  std::vector<int32_t> seq_;  // [tree nodes] draft sequence id, -1 = not decoded
};

}  // namespace graft
