// Internal: turns a set of occurrences of the matched context into a CandidateTrie.
// Shared by SuffixIndex and Datastore so both follow the one probability model
// documented on RetrievalOptions (graft/retrieval.h).
#pragma once

#include <cstdint>
#include <span>

#include "graft/candidates.h"
#include "graft/retrieval.h"

namespace graft::retrieval_internal {

// conf(l) = l / (l + alpha): how much a match of l tokens is trusted.
inline float Confidence(int64_t l, float alpha) {
  return static_cast<float>(l) / (static_cast<float>(l) + alpha);
}

// `starts` holds, for each occurrence in the sample S, the text position of its first
// continuation item (the position just after the match); every entry must be
// < text.size(). Negative text tokens are separators: they count as "known" but never
// become nodes. `starts` is used as scratch (reordered and advanced in place).
// Clears `out` (source untouched) and writes at most `budget` nodes, best-first by
// path_prob, depth <= options.max_depth.
// Cost: O(sum over expanded nodes of their occurrences * log) <= O(budget * |S| log |S|),
// typically O(|S| log |S| + budget log budget).
void ExpandOccurrences(TokenSpan text, std::span<int64_t> starts, int32_t match_len,
                       int32_t budget, const RetrievalOptions& options, CandidateTrie* out);

}  // namespace graft::retrieval_internal
