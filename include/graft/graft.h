// Graft: fill a tree's free verification slots with retrieved candidates
// (docs/design.md §1 step 4). Pure C++: no llama.h.
#pragma once

#include <cstdint>
#include <span>

#include "graft/calibration.h"
#include "graft/candidates.h"
#include "graft/tree.h"

namespace graft {

struct GraftOptions {
  // Candidates whose estimated path acceptance is below this are not added (they would
  // be worth less than the slot). 0 = fill every free slot.
  float min_accept_prob = 0.0f;
  // Candidates deeper than this (tree depth, root = 0) are not added.
  int max_depth = 64;
};

// One candidate trie to attach: its implicit root is tree node `attach_node`.
struct GraftRequest {
  int32_t attach_node = 0;
  const CandidateTrie* trie = nullptr;  // not owned; must outlive the call
  Source source = Source::kRequest;     // stored as each added node's source
};

// Global greedy fill. Expected accepted length = sum over nodes of P(node accepted),
// so each free slot goes to the frontier candidate (one whose parent is already in the
// tree) with the highest estimated path acceptance
//   gain = a(tree parent) * min(Calibration::Estimate(source, candidate prob, tree depth),
//                               1 - edges of the parent's children so far)
// (siblings are exclusive, as in PathAcceptance; a candidate whose room shrank while it
// waited is requeued at its lowered gain), across all requests (a max-heap; ties to the lower request index, then lower trie
// index). A candidate whose token equals an existing child of its tree parent is merged
// into it: no slot spent, and its trie children become candidates under that child
// (whose a is raised to the candidate's estimate if that is higher).
// Contract: adds nodes only while tree->size() < budget, never exceeds it (a tree
// already at or over budget gets nothing); never creates duplicate siblings; appends
// only, so existing indices are unchanged and parents precede children; added nodes
// keep the trie's edge prob, with score = parent's score * prob.
// Returns the number of nodes added.
// Cost: O(n + m log m) for n tree nodes and m candidates in all tries.
int32_t GraftMany(TokenTree* tree, std::span<const GraftRequest> requests, int32_t budget,
                  const Calibration& calibration, const GraftOptions& options = {});

// One trie under one node: GraftMany with a single request.
int32_t Graft(TokenTree* tree, int32_t attach_node, const CandidateTrie& cand, Source src,
              int32_t budget, const Calibration& calibration, const GraftOptions& options = {});

}  // namespace graft
