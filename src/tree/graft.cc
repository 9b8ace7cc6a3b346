// Graft: global greedy fill of free slots with retrieved candidates.
#include "graft/graft.h"

#include <algorithm>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace graft {
namespace {

uint64_t ChildKey(int32_t parent, Token t) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(t);
}

// A trie node whose parent is already placed in the tree.
struct Frontier {
  double gain;       // estimated P(accepted) if added under tree_parent
  int32_t request;   // index into requests
  int32_t trie_node; // index into that request's trie
  int32_t tree_parent;
};

struct WorseFrontier {  // std::priority_queue is a max-heap on "less"
  bool operator()(const Frontier& x, const Frontier& y) const {
    if (x.gain != y.gain) return x.gain < y.gain;
    if (x.request != y.request) return x.request > y.request;
    return x.trie_node > y.trie_node;
  }
};

}  // namespace

int32_t GraftMany(TokenTree* tree, std::span<const GraftRequest> requests, int32_t budget,
                  const Calibration& calibration, const GraftOptions& options) {
  if (tree == nullptr || tree->size() == 0) {
    throw std::invalid_argument("GraftMany: tree must have a root");
  }
  const int32_t n0 = tree->size();
  // acc[i]: estimated P(node i accepted); raised on merges, grows with added nodes.
  std::vector<double> acc = PathAcceptance(*tree, calibration);
  // mass[i]: the edge estimates of node i's children so far. Siblings are exclusive
  // (distinct tokens, one of them at most is accepted), so a new child gets at most
  // 1 - mass[parent] (as in PathAcceptance).
  std::vector<double> mass(static_cast<size_t>(n0), 0.0);
  for (int32_t i = 1; i < n0; ++i) {
    const int32_t p = tree->parent[i];
    if (acc[p] > 0) mass[p] += acc[i] / acc[p];
  }
  // (parent, token) -> child, for O(1) merge checks.
  std::unordered_map<uint64_t, int32_t> child_of;
  child_of.reserve(static_cast<size_t>(n0) * 2);
  for (int32_t i = 1; i < n0; ++i) child_of.emplace(ChildKey(tree->parent[i], tree->token[i]), i);

  // Per request: the children lists of its trie (roots under index -1 -> slot 0).
  std::vector<std::vector<std::vector<int32_t>>> kids(requests.size());
  std::priority_queue<Frontier, std::vector<Frontier>, WorseFrontier> heap;

  auto push_children = [&](int32_t r, int32_t trie_parent, int32_t tree_parent) {
    const CandidateTrie& trie = *requests[r].trie;
    const int32_t depth = tree->depth[tree_parent] + 1;
    if (depth > options.max_depth) return;
    for (int32_t c : kids[r][trie_parent + 1]) {
      const double g =
          acc[tree_parent] * calibration.Estimate(requests[r].source, trie.prob[c], depth);
      heap.push(Frontier{g, r, c, tree_parent});
    }
  };

  for (size_t r = 0; r < requests.size(); ++r) {
    const GraftRequest& req = requests[r];
    if (req.trie == nullptr) continue;
    if (req.attach_node < 0 || req.attach_node >= n0) {
      throw std::invalid_argument("GraftMany: attach_node " + std::to_string(req.attach_node) +
                                  " is not a node of the tree");
    }
    const CandidateTrie& trie = *req.trie;
    kids[r].assign(static_cast<size_t>(trie.size()) + 1, {});
    for (int32_t i = 0; i < trie.size(); ++i) {
      const int32_t p = trie.parent[i];
      if (p < -1 || p >= i) {
        throw std::invalid_argument("GraftMany: trie node " + std::to_string(i) +
                                    " does not come after its parent");
      }
      kids[r][p + 1].push_back(i);
    }
    push_children(static_cast<int32_t>(r), -1, req.attach_node);
  }

  int32_t added = 0;
  while (!heap.empty()) {
    const Frontier f = heap.top();
    heap.pop();
    const GraftRequest& req = requests[f.request];
    const CandidateTrie& trie = *req.trie;
    const Token t = trie.token[f.trie_node];
    const auto it = child_of.find(ChildKey(f.tree_parent, t));
    if (it != child_of.end()) {  // merge: free, descend into the existing child
      const int32_t node = it->second;
      if (f.gain > acc[node]) {
        if (acc[f.tree_parent] > 0) mass[f.tree_parent] += (f.gain - acc[node]) / acc[f.tree_parent];
        acc[node] = f.gain;
      }
      push_children(f.request, f.trie_node, node);
      continue;
    }
    if (tree->size() >= budget) break;  // merges need no slot, but nothing below them could be added
    // Siblings added since this candidate was queued may have taken its mass: requeue
    // it at its lowered gain (gains only fall, so the heap order stays valid).
    const double parent_acc = acc[f.tree_parent];
    const double room = parent_acc * std::max(0.0, 1.0 - mass[f.tree_parent]);
    if (f.gain > room + 1e-12) {
      heap.push(Frontier{room, f.request, f.trie_node, f.tree_parent});
      continue;
    }
    if (f.gain < static_cast<double>(options.min_accept_prob)) break;  // heap is sorted: all the rest are lower
    const int32_t node = tree->Add(f.tree_parent, t, trie.prob[f.trie_node], req.source);
    acc.push_back(f.gain);
    mass.push_back(0.0);
    if (parent_acc > 0) mass[f.tree_parent] += f.gain / parent_acc;
    child_of.emplace(ChildKey(f.tree_parent, t), node);
    ++added;
    push_children(f.request, f.trie_node, node);
  }
  return added;
}

int32_t Graft(TokenTree* tree, int32_t attach_node, const CandidateTrie& cand, Source src,
              int32_t budget, const Calibration& calibration, const GraftOptions& options) {
  const GraftRequest req{attach_node, &cand, src};
  return GraftMany(tree, std::span<const GraftRequest>(&req, 1), budget, calibration, options);
}

}  // namespace graft
