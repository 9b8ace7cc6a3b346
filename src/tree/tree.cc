// TokenTree and LeafSequenceIds (declared in graft/tree.h).
#include "graft/tree.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace graft {

void TokenTree::Reset(Token root) {
  token.assign(1, root);
  parent.assign(1, -1);
  depth.assign(1, 0);
  prob.assign(1, 1.0f);
  score.assign(1, 1.0f);
  source.assign(1, Source::kRoot);
}

int32_t TokenTree::Add(int32_t parent_index, Token t, float p, Source s) {
  if (parent_index < 0 || parent_index >= size()) {
    throw std::invalid_argument("TokenTree::Add: parent " + std::to_string(parent_index) +
                                " is not a node of a tree of size " + std::to_string(size()));
  }
  token.push_back(t);
  parent.push_back(parent_index);
  depth.push_back(depth[parent_index] + 1);
  prob.push_back(p);
  score.push_back(score[parent_index] * p);
  source.push_back(s);
  return size() - 1;
}

int32_t TokenTree::FindChild(int32_t node, Token t) const {
  // Children always come after their parent: start the scan there.
  for (int32_t i = node + 1; i < size(); ++i) {
    if (parent[i] == node && token[i] == t) return i;
  }
  return -1;
}

std::vector<int32_t> TokenTree::Children(int32_t node) const {
  std::vector<int32_t> out;
  for (int32_t i = node + 1; i < size(); ++i) {
    if (parent[i] == node) out.push_back(i);
  }
  return out;
}

std::vector<Token> TokenTree::PathTokens(int32_t node) const {
  std::vector<Token> out(static_cast<size_t>(depth[node]) + 1);
  for (int32_t i = node, k = depth[node]; i >= 0; i = parent[i], --k) out[k] = token[i];
  return out;
}

std::vector<int32_t> TokenTree::PathNodes(int32_t node) const {
  std::vector<int32_t> out(static_cast<size_t>(depth[node]) + 1);
  for (int32_t i = node, k = depth[node]; i >= 0; i = parent[i], --k) out[k] = i;
  return out;
}

std::vector<int32_t> TokenTree::Leaves() const {
  std::vector<char> has_child(token.size(), 0);
  for (int32_t i = 1; i < size(); ++i) has_child[parent[i]] = 1;
  std::vector<int32_t> out;
  for (int32_t i = 0; i < size(); ++i) {
    if (!has_child[i]) out.push_back(i);
  }
  return out;
}

std::string TokenTree::Validate() const {
  const size_t n = token.size();
  if (parent.size() != n || depth.size() != n || prob.size() != n || score.size() != n ||
      source.size() != n) {
    return "array sizes differ";
  }
  if (n == 0) return "empty tree (no root)";
  if (parent[0] != -1) return "node 0 has a parent";
  if (depth[0] != 0) return "root depth is not 0";
  if (prob[0] != 1.0f || score[0] != 1.0f) return "root prob/score is not 1";
  if (source[0] != Source::kRoot) return "root source is not kRoot";
  // (parent, token) pairs seen so far, to detect duplicate siblings.
  std::unordered_set<uint64_t> seen;
  seen.reserve(n);
  for (size_t i = 1; i < n; ++i) {
    const std::string at = "node " + std::to_string(i) + ": ";
    const int32_t p = parent[i];
    if (p < 0 || static_cast<size_t>(p) >= i) {
      return at + "parent " + std::to_string(p) + " does not precede it";
    }
    if (depth[i] != depth[p] + 1) return at + "depth is not parent's depth + 1";
    if (source[i] == Source::kRoot) return at + "non-root node has source kRoot";
    if (!(prob[i] >= 0.0f && prob[i] <= 1.0f)) return at + "prob outside [0, 1]";
    const float expect = score[p] * prob[i];
    if (!(std::fabs(score[i] - expect) <= 1e-5f * std::max(1.0f, std::fabs(expect)))) {
      return at + "score is not parent's score * prob";
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(p)) << 32) |
                         static_cast<uint32_t>(token[i]);
    if (!seen.insert(key).second) {
      return at + "duplicate sibling token " + std::to_string(token[i]);
    }
  }
  return "";
}

std::vector<std::vector<int32_t>> LeafSequenceIds(const std::vector<int32_t>& parent) {
  const int32_t n = static_cast<int32_t>(parent.size());
  std::vector<std::vector<int32_t>> out(parent.size());
  if (n == 0) return out;
  if (parent[0] != -1) throw std::invalid_argument("LeafSequenceIds: node 0 must be the root");
  std::vector<char> has_child(parent.size(), 0);
  for (int32_t i = 1; i < n; ++i) {
    if (parent[i] < 0 || parent[i] >= i) {
      throw std::invalid_argument("LeafSequenceIds: parent of node " + std::to_string(i) +
                                  " does not precede it");
    }
    has_child[parent[i]] = 1;
  }
  // Leaves are visited in ascending id order, so every list comes out sorted.
  int32_t leaf_id = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (has_child[i]) continue;
    for (int32_t v = i; v >= 0; v = parent[v]) out[v].push_back(leaf_id);
    ++leaf_id;
  }
  return out;
}

}  // namespace graft
