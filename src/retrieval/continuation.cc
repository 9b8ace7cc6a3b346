#include "retrieval/continuation.h"

#include <algorithm>
#include <queue>
#include <vector>

namespace graft::retrieval_internal {
namespace {

// A trie node waiting in the frontier; its occurrences are starts[begin, end), each
// pointing at this node's token in the text.
struct Pending {
  float path_prob;
  float prob;
  int32_t depth;         // 1 = child of the implicit root
  Token token;
  int32_t parent;        // index in `out`, -1 = implicit root
  uint32_t begin, end;   // slice of `starts`
};

// Max-heap order: higher path_prob first, then shallower, then lower token.
struct Worse {
  bool operator()(const Pending& a, const Pending& b) const {
    if (a.path_prob != b.path_prob) return a.path_prob < b.path_prob;
    if (a.depth != b.depth) return a.depth > b.depth;
    if (a.token != b.token) return a.token > b.token;
    return a.begin > b.begin;
  }
};

}  // namespace

void ExpandOccurrences(TokenSpan text, std::span<int64_t> starts, int32_t match_len,
                       int32_t budget, const RetrievalOptions& options, CandidateTrie* out) {
  out->clear();
  if (budget <= 0 || starts.empty() || options.max_depth <= 0) return;
  const int64_t n = static_cast<int64_t>(text.size());
  std::priority_queue<Pending, std::vector<Pending>, Worse> frontier;
  std::vector<uint64_t> keys;  // sort scratch

  // Advances starts[b, e) by `advance` (0 or 1) so they point at the next item, groups
  // them by next token and pushes one child per real token. One pass in the common case
  // (every live occurrence continues with the same token).
  auto push_children = [&](uint32_t b, uint32_t e, int advance, int32_t depth, int32_t parent,
                           float parent_path) {
    uint32_t known = 0, live_end = b;
    Token first = -1;
    bool all_same = true;
    for (uint32_t i = b; i < e; ++i) {
      const int64_t p = starts[i] + advance;
      starts[i] = p;
      if (p >= n) continue;
      ++known;
      const Token t = text[p];
      if (t < 0) continue;
      if (live_end == b) first = t;
      else all_same = all_same && t == first;
      std::swap(starts[live_end++], starts[i]);
    }
    if (live_end == b) return;
    const float denom = static_cast<float>(known) + options.count_smoothing;
    const float conf = Confidence(match_len + depth - 1, options.confidence_alpha);
    if (all_same) {
      const float prob = std::min(1.0f, static_cast<float>(live_end - b) / denom * conf);
      if (prob > 0.0f) frontier.push({parent_path * prob, prob, depth, first, parent, b, live_end});
      return;
    }
    // Sort (token, position) keys without indirection; positions < 2^32 always hold for
    // the request index and for the datastore (uint32 suffix array).
    keys.clear();
    for (uint32_t i = b; i < live_end; ++i)
      keys.push_back((static_cast<uint64_t>(text[starts[i]]) << 32) | static_cast<uint64_t>(starts[i]));
    std::sort(keys.begin(), keys.end());
    for (uint32_t i = b; i < live_end;) {
      const uint32_t t = static_cast<uint32_t>(keys[i - b] >> 32);
      uint32_t j = i;
      while (j < live_end && static_cast<uint32_t>(keys[j - b] >> 32) == t) {
        starts[j] = static_cast<int64_t>(keys[j - b] & 0xFFFFFFFFu);
        ++j;
      }
      const float prob = std::min(1.0f, static_cast<float>(j - i) / denom * conf);
      if (prob > 0.0f)
        frontier.push({parent_path * prob, prob, depth, static_cast<Token>(t), parent, i, j});
      i = j;
    }
  };

  push_children(0, static_cast<uint32_t>(starts.size()), 0, 1, -1, 1.0f);
  while (!frontier.empty() && out->size() < budget) {
    const Pending node = frontier.top();
    frontier.pop();
    const int32_t index = out->Add(node.parent, node.token, node.prob);
    if (node.depth >= options.max_depth) continue;
    push_children(node.begin, node.end, 1, node.depth + 1, index, out->path_prob[index]);
  }
}

}  // namespace graft::retrieval_internal
