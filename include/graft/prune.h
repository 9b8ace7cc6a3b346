// Calibrated pruning of a proposal tree (step 2 of the algorithm: drop nodes worth
// less than a verification slot). Pure C++: no llama.h. The drafter applies the same
// threshold between levels (dynamic depth, src/engine/drafter.cc).
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

}  // namespace graft
