// Calibrated pruning of a proposal tree (DESIGN.md §1 step 2) and the dynamic-depth
// rule the drafter uses between draft levels. Pure C++: no llama.h.
#pragma once

#include <cstdint>
#include <vector>

#include "graft/calibration.h"
#include "graft/tree.h"

namespace graft {

struct PruneOptions {
  // The exchange rate of a verification slot: a node is worth a(node) expected accepted
  // tokens (a = product of calibrated edge acceptance along its path), so a node with
  // a < min_accept_prob is dropped, with its subtree. Tune from measured verify costs;
  // on CPU, where each extra verified token costs, 0.05..0.1 is a reasonable start.
  float min_accept_prob = 0.05f;
  // Nodes deeper than this are dropped (root = depth 0).
  int max_depth = 16;
  // If > 0, keep at most this many nodes (root included): the ones with the highest a,
  // ties to the lower index. Since a never grows along a path, the kept set stays a
  // subtree. 0 = no limit.
  int32_t max_nodes = 0;
};

// Returns the subtree of `in` of nodes that pass `options` (see PruneOptions); the
// root is always kept. Never adds nodes; kept nodes keep their relative order, token,
// prob, score, depth and source, so parents still precede children. If `kept_index`
// is not null it receives, per new node, its index in `in` ([out.size()]; [0] = 0).
// Cost: O(n) plus O(n log n) when max_nodes binds. Deep copy of the kept nodes.
TokenTree Prune(const TokenTree& in, const PruneOptions& options, const Calibration& calibration,
                std::vector<int32_t>* kept_index = nullptr);

// Dynamic depth: true when drafting another level cannot produce a node that Prune
// would keep. `best_frontier_calibrated_prob` is the largest a(child) the next level
// could reach, i.e. max over frontier nodes of a(frontier) (optionally times the
// calibrated acceptance of its best child edge); since a never grows along a path,
// once it is below min_accept_prob every deeper node would be pruned. O(1).
bool ShouldStopDrafting(double best_frontier_calibrated_prob, const PruneOptions& options);

// Same, and also stops when the next level (`next_depth`) would exceed max_depth.
bool ShouldStopDrafting(double best_frontier_calibrated_prob, int next_depth,
                        const PruneOptions& options);

}  // namespace graft
