// The step's seam: every decoding method is a Proposer that builds the tree one
// target pass verifies. The loop (engine.cc) never asks which method it runs:
//
//   Begin(request)                once per request, after the prompt's prefill
//   Propose(step, &tree)          tree = root (the last committed token) + proposals;
//                                 or it asks for a draft, and then
//   Drafted(step, call, &tree)    finishes the tree the draft model built
//   (or Declined(step, &tree)     a group passed over the draft it offered)
//   <one target pass, verification>
//   Learn(step, tree, verdict)    after verification, before the target cache commits
//   Commit(step, verdict)         the accepted path is committed; follow it
//
// State that outlives a request (history, next-token table, calibration, the draft
// cache, the cost profile) is in EngineState, shared by the proposers; a proposer
// object lives as long as its engine, so it may keep its own learned state too
// (graft's draft gate). Adding a method = one proposer file + a row in methods.cc.
//
// The draft model runs between Propose and Drafted, outside the proposer, so that an
// EngineGroup can draft for all its requests in shared passes (DraftTogether).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/cost_model.h"
#include "engine/scoped_ms.h"
#include "engine/drafter.h"
#include "graft/backend.h"
#include "graft/calibration.h"
#include "graft/candidates.h"
#include "graft/engine.h"
#include "graft/graft.h"
#include "graft/retrieval_datastore.h"
#include "graft/retrieval_next_token.h"
#include "graft/retrieval_pld.h"
#include "graft/retrieval_suffix.h"
#include "graft/tree.h"
#include "graft/verify.h"

namespace graft {

// What an Engine owns and every proposer may use. Lives for the engine.
struct EngineState {
  EngineState(const Model& target, const Model* draft, const EngineConfig& config);

  const Model& target;
  const Model* draft;  // may be null
  EngineConfig config;
  std::shared_ptr<Context> tctx;      // target KV cache (shared by an EngineGroup's engines)
  int32_t lane = 0;                   // this engine's lane of tctx (and dctx): its committed tokens
  std::shared_ptr<Context> dctx;      // draft KV cache (null without a draft; lane `lane`,
                                      // shared by an EngineGroup's engines)
  std::unique_ptr<Drafter> drafter;   // over dctx's lane `lane`
  std::unique_ptr<Datastore> datastore;  // corpus index (null without --index)
  HistoryIndex history;      // earlier outputs of this engine
  NextTokenTable recycle;    // successors seen in the target's verification logits
  Calibration calibration;   // acceptance per (source, confidence, depth), all requests
  CalibrationCounts learned_prior;  // what calibration started from (config.learned_state), capped
  RequestRetriever request;  // this request's prompt + output, merged with `history`
  PromptLookup pld;
  std::optional<CostModel> cost;  // graft's cost curves, loaded on first use (Costs())
  std::vector<Token> tctx_tokens;  // tokens in the target cache (prefix reuse)

  // The cost curves of this engine's models on this machine (cached profile, measured
  // once if missing; the measuring time is added to `*calibrate_ms`).
  const CostModel& Costs(double* calibrate_ms);
};

// One request in flight: what the loop and the proposers share for its duration.
struct RequestState {
  const GenerateRequest& request;
  const DecodeOptions& options;
  std::vector<Token> committed;  // prompt + emitted tokens; back() = the next root
  int32_t generated = 0;         // tokens emitted so far
  GenerationStats* stats;
  double lazy_prefill_ms = 0;    // prefill done inside the decode loop (the draft's prompt)
  // The last pass's rows after the root a lazy pass computed alone or first of a
  // product, and its products over c >= 2 rows ([c]) (GenerationStats::rows_read and
  // read_products), for the proposer's Learn and Commit (CostModel::ReadsMs).
  int64_t step_rows_read = 0;
  std::vector<int64_t> step_read_products;
};

// Limits of one step, from the options and the room left in the context.
struct StepLimits {
  int32_t budget;     // nodes in the tree at most, root included (>= 1)
  int32_t max_depth;  // deepest node allowed (>= 0)
  BatchLoad load;     // other requests' share of the same target pass (EngineGroup)
};

// The draft model's side of one step, as built by the loop between Propose and Drafted.
struct DraftCall {
  int32_t passes = 0;    // draft decode calls, the catch-up included
  int32_t catch_up = 0;  // rows of the catch-up pass (committed tokens the cache lacked)
  DraftParams params;    // what Propose asked for
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual void Begin(RequestState& rs) {}
  // `tree` holds just the root on entry; add proposals (at most limits.budget nodes).
  // Returns the draft the step still needs, or nullopt when the tree is done. With a
  // draft, the loop resets `tree` to its root, has the draft model build it (Drafter,
  // these params) and calls Drafted with the same limits.
  virtual std::optional<DraftParams> Propose(RequestState& rs, const StepLimits& limits, TokenTree* tree) = 0;
  // After the draft Propose asked for: `tree` is the drafted tree, the drafter holds
  // its nodes (Drafter::DraftSeq). Finish the tree.
  virtual void Drafted(RequestState& rs, const StepLimits& limits, const DraftCall& call, TokenTree* tree) {}
  // After Propose asked for a draft: null when the step needs it, or the offer of a
  // proposer that can do without it (DraftOffer: the step's yield either way). An
  // EngineGroup weighs the offers of a shared step (ChooseDrafts) and calls Declined,
  // instead of drafting, for those it does not take: it finishes `tree` (just the
  // root on entry) without the draft.
  virtual const DraftOffer* offer() const { return nullptr; }
  virtual void Declined(RequestState& rs, const StepLimits& limits, TokenTree* tree) {}
  // After verification, before the target cache commits. `logits(node)` is the target's
  // row for a verified node. Calibration is recorded by the loop, not here.
  virtual void Learn(RequestState& rs, const TokenTree& tree, const VerifyResult& vr,
                     const std::function<const float*(int32_t)>& logits) {}
  // After the commit: `emitted` = the tokens the step committed (accepted + bonus).
  virtual void Commit(RequestState& rs, const VerifyResult& vr, const std::vector<Token>& emitted) {}
};

// --- Building blocks shared by proposers -------------------------------------------

// Retrieval queries of one step: each adds a trie to graft under a tree node.
class Retrieval {
 public:
  // The last `tail` committed tokens (0 = all) + the path root..node (root excluded).
  static std::vector<Token> ContextFor(const std::vector<Token>& committed, const TokenTree& tree, int32_t node,
                                       int64_t tail);
  // Queries `src` for at most `nodes` candidates continuing `node`'s path, handing it
  // the context it reads (RetrievalSource::ContextTokens). O(query).
  void Query(const RetrievalSource& src, const std::vector<Token>& committed, const TokenTree& tree, int32_t node,
             int32_t nodes);
  // Adds a ready trie (e.g. the oracle's) under `node`.
  void Add(CandidateTrie trie, int32_t node, Source source);
  // Grafts every queued trie into `tree` (GraftMany, at most `budget` nodes) and clears
  // the queue. Returns the nodes added.
  int32_t GraftInto(TokenTree* tree, int32_t budget, int32_t max_depth, float min_accept,
                    const Calibration& calibration);

 private:
  std::vector<CandidateTrie> tries_;
  std::vector<GraftRequest> requests_;  // [i] grafts tries_[i]
};

// Draft settings for one step from the options: a tree of `draft_topk` children per
// node and `draft_frontier` nodes per level, at most limits.budget nodes and
// min(draft_max, limits.max_depth) levels; calibrated (dynamic depth at
// prune.min_accept_prob) when `calibration` is not null.
DraftParams DraftParamsFor(const DecodeOptions& o, const StepLimits& limits, const Calibration* calibration);

// Prunes a drafted tree by calibrated acceptance (o.prune, at most `max_depth` deep)
// and tells the drafter which nodes survived.
void PruneDraft(EngineState& es, const DecodeOptions& o, int32_t max_depth, TokenTree* tree);

// Committed tokens the draft's cache lacks, the root included (>= 1): the rows its
// next catch-up pass decodes, or, before the draft has seen this request's prompt,
// that prompt too. O(1).
int32_t DraftCatchUp(const EngineState& es, const RequestState& rs);

// Rows of the request's catch-up in a shared draft pass: DraftCatchUp less a prompt the
// draft has not seen, which PrefillDraftPrompt prefills apart first (>= 1). O(1).
int32_t SharedCatchUp(const EngineState& es, const RequestState& rs);

// The draft model's copy of the request's prompt, prefilled lazily (a method may never
// draft) and billed as prefill; drafting catches the rest up.
void PrefillDraftPrompt(EngineState& es, RequestState& rs);

// One request's draft for DraftShared: its engine's drafter builds `tree` (just the
// root on entry).
struct DraftRequest {
  EngineState* es;
  RequestState* rs;
  DraftParams params;
  TokenTree* tree;
};

// Drafts every request's tree at once, in shared passes (DraftTogether: their engines'
// drafters on lanes of one context), their prompts already in the draft cache
// (PrefillDraftPrompt). Bills each request every shared pass's time and the passes it
// took part in; adds the passes run to `*passes` when not null. Returns the calls in
// the requests' order.
std::vector<DraftCall> DraftShared(const std::vector<DraftRequest>& requests, int64_t* passes = nullptr);

// Drafts `tree` (just the root on entry) alone: PrefillDraftPrompt, then DraftShared.
DraftCall DraftTree(EngineState& es, RequestState& rs, const DraftParams& params, TokenTree* tree);

// Feeds the next-token table from the target's rows of the accepted nodes. O(accepted x V).
void LearnNextTokens(EngineState& es, const TokenTree& tree, const VerifyResult& vr,
                     const std::function<const float*(int32_t)>& logits);

// Factories, one per proposer file.
std::unique_ptr<Proposer> MakeArProposer();
std::unique_ptr<Proposer> MakeDraftProposer(EngineState& es, Method method);  // chain, tree, pruned
std::unique_ptr<Proposer> MakeRetrievalProposer(EngineState& es, Method method);  // pld, suffix, rest, recycle
std::unique_ptr<Proposer> MakeOracleProposer(EngineState& es);
std::unique_ptr<Proposer> MakeGraftProposer(EngineState& es);

// The proposer for `method` (methods.cc: the method table).
std::unique_ptr<Proposer> MakeProposer(EngineState& es, Method method);

}  // namespace graft
