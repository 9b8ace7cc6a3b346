// The speculation tree shared by every method (draft, retrieval, graft, oracle).
// Pure C++: no llama.h. Struct of arrays; node 0 is always the root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graft/types.h"

namespace graft {

// Node 0 is the root: the last committed token, known correct, not yet in the
// target's KV cache (it is evaluated in the verification pass at position P).
// Every other node is a proposed continuation of its parent. Parents always precede
// children, so index order is a topological order and `pos = P + depth` never
// decreases along a root-to-leaf path.
struct TokenTree {
  std::vector<Token> token;     // [n]
  std::vector<int32_t> parent;  // [n], -1 for the root only
  std::vector<int32_t> depth;   // [n], root = 0
  std::vector<float> prob;      // [n], edge confidence P(token | path to parent) from its source; root = 1
  std::vector<float> score;     // [n], path confidence = product of prob from the root; root = 1
  std::vector<Source> source;   // [n], who proposed the node (root = kRoot)

  int32_t size() const { return static_cast<int32_t>(token.size()); }

  // Clears the tree and makes `root` node 0.
  void Reset(Token root);

  // Appends a child of `parent_index`; returns its index. O(1). Does not merge
  // duplicates: use FindChild first where that matters.
  int32_t Add(int32_t parent_index, Token t, float p, Source s);

  // Index of the child of `node` with token `t`, or -1. O(n).
  int32_t FindChild(int32_t node, Token t) const;

  // Children of `node` in index order. O(n).
  std::vector<int32_t> Children(int32_t node) const;

  // Tokens on the path root..node inclusive (root first). O(depth).
  std::vector<Token> PathTokens(int32_t node) const;

  // Node indices on the path root..node inclusive (root first). O(depth).
  std::vector<int32_t> PathNodes(int32_t node) const;

  // Nodes with no children, in index order. O(n).
  std::vector<int32_t> Leaves() const;

  // Checks every invariant (root at 0, parents before children, depth = parent's
  // depth + 1, score = parent's score * prob, no duplicate sibling tokens).
  // Returns "" when valid, else a description of the first violation.
  std::string Validate() const;
};

// Tree attention through sequence ids (docs/design.md §3): leaf j of the tree (in
// Leaves() order) gets sequence id j; each node is tagged with the ids of every
// leaf in its subtree. The first id of each node is the one llama.cpp uses for
// the node's mask row; it must be a leaf under the node.
// Returns [n] lists; out[i] is sorted ascending. O(n * depth).
std::vector<std::vector<int32_t>> LeafSequenceIds(const std::vector<int32_t>& parent);

}  // namespace graft
