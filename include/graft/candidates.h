// The common currency of every retrieval source: a small trie of proposed
// continuations of a context, with an estimated probability per edge.
#pragma once

#include <cstdint>
#include <vector>

#include "graft/types.h"

namespace graft {

// Nodes are stored parents-first (node i's parent < i). The trie's implicit root is
// the end of the queried context; it is not stored.
struct CandidateTrie {
  std::vector<Token> token;     // [n]
  std::vector<int32_t> parent;  // [n], -1 = child of the implicit root (the context end)
  std::vector<float> prob;      // [n], estimated P(token | context + path to parent), in (0, 1]
  std::vector<float> path_prob; // [n], product of prob from the implicit root to this node
  Source source = Source::kRequest;  // who produced it (a merged trie keeps the first source)

  int32_t size() const { return static_cast<int32_t>(token.size()); }
  bool empty() const { return token.empty(); }
  void clear() { token.clear(); parent.clear(); prob.clear(); path_prob.clear(); }

  // Appends a node; returns its index. `parent` must be -1 or an existing index.
  int32_t Add(int32_t parent_index, Token t, float p) {
    token.push_back(t);
    parent.push_back(parent_index);
    prob.push_back(p);
    path_prob.push_back(parent_index < 0 ? p : path_prob[parent_index] * p);
    return size() - 1;
  }
};

}  // namespace graft
