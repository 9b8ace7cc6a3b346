// Draft-model drafting with tree attention in the draft's own context.
//
// A drafter owns one lane of the draft context (a plain context has one); the lane's
// sequence 0 always holds a prefix of the committed tokens.
// Each step first catches up (decodes the committed tokens it lacks, the root last),
// then expands the tree level by level, EAGLE-2 style: the best `frontier` nodes of
// the newest level (by path score, or by calibrated acceptance when pruning) are
// decoded in one batch, each in a fresh sequence id that first copies its parent's
// sequence, so every node attends to exactly the prefix and its ancestors. After
// verification, Commit keeps the deepest accepted node that was decoded. Drafters on
// several lanes of one context can share every pass (DraftTogether).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/sequence_ops.h"
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

struct DenseTree;

class Drafter {
 public:
  // A drafter over lane `lane` of `ctx` (the lane's sequence ids are its own).
  explicit Drafter(Context* ctx, int32_t lane = 0);
  ~Drafter();
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;

  Context& context() const { return *ctx_; }
  int32_t lane() const { return lane_; }

  // Builds a draft tree rooted at committed.back() into `tree` (Reset by the caller's
  // root). `committed` = all committed tokens, root last. Returns the number of draft
  // decode calls; `pass_rows`, when not null, counts each call by its rows (the
  // catch-up's tokens, then each level's frontier; see CountPass). After it,
  // DraftSeq(i) tells which tree nodes the draft decoded. = Start, then one Decode
  // and Continue per pass until it says stop, then Finish.
  int32_t Draft(const std::vector<Token>& committed, const DraftParams& params, TokenTree* tree,
                std::vector<int32_t>* pass_rows = nullptr);

  // The same, one pass at a time, so that drafters on several lanes of one context can
  // share every pass (DraftTogether). Start appends the first pass's rows (the
  // catch-up, root last) to `rows`; a catch-up longer than kMaxCatchUpRows first
  // prefills its head alone. After the pass that held them from batch row `row0`,
  // Continue grows the tree from their logits and appends the next level's rows; it
  // returns false when drafting is over. Finish writes the tree (as Draft).
  static constexpr int32_t kMaxCatchUpRows = 64;
  void Start(const std::vector<Token>& committed, const DraftParams& params, std::vector<BatchEntry>* rows);
  bool Continue(int32_t row0, std::vector<BatchEntry>* rows);
  void Finish(TokenTree* tree);
  // Forgets a draft in progress after a failed pass (the caller truncates the lane).
  void Abandon();

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
  int32_t lane_;
  DraftParams params_;             // of the draft in progress
  std::unique_ptr<DenseTree> dense_;  // the draft in progress (Start .. Finish)
  std::vector<int32_t> expand_;    // nodes whose rows the pass in flight holds
  int32_t catch_up_ = 0;           // rows of the catch-up in flight (0 = a level is)
  int32_t base_ = 0;               // position of the root
  int32_t depth_ = 0;              // level the pass in flight decodes
  int32_t max_depth_ = 0;
  int32_t next_seq_ = 1;
  std::vector<int32_t> seq_;  // [tree nodes] draft sequence id, -1 = not decoded
};

// One drafter's share of DraftTogether.
struct DraftJob {
  Drafter* drafter;
  const std::vector<Token>* committed;  // as Draft's
  DraftParams params;
  TokenTree* tree;                      // holds the root on entry
  std::vector<int32_t>* pass_rows = nullptr;  // counts this drafter's rows per pass
  int32_t passes = 0;                   // out: passes this drafter took part in
};

// Drafts every job at once, each on its own lane of one context: each pass holds every
// unfinished job's next rows (first the catch-ups, then level after level), so n
// requests' drafts cost one pass per level instead of n. Each tree is the one Draft
// would build alone, up to the rounding of batched kernels. Returns the passes run.
int32_t DraftTogether(std::vector<DraftJob>& jobs);

}  // namespace graft
