#include "graft/retrieval.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

namespace graft {

RetrievalSource::~RetrievalSource() = default;

namespace {
uint64_t ChildKey(int32_t parent, Token t) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(parent + 1)) << 32) |
         static_cast<uint32_t>(t);
}
}  // namespace

void MergeTries(const CandidateTrie& a, const CandidateTrie& b, int32_t budget,
                CandidateTrie* out) {
  const Source source = a.source;
  out->clear();
  out->source = source;
  if (budget <= 0) return;
  // Union, parents first: a's nodes keep their indices, b's new nodes follow.
  CandidateTrie u;
  u.token = a.token;
  u.parent = a.parent;
  u.prob = a.prob;
  std::unordered_map<uint64_t, int32_t> child;  // (parent + 1, token) -> union index
  child.reserve(static_cast<size_t>(a.size() + b.size()) * 2);
  for (int32_t i = 0; i < a.size(); ++i) child.emplace(ChildKey(a.parent[i], a.token[i]), i);
  std::vector<int32_t> b_to_u(b.size());
  for (int32_t i = 0; i < b.size(); ++i) {
    const int32_t p = b.parent[i] < 0 ? -1 : b_to_u[b.parent[i]];
    auto [it, inserted] = child.emplace(ChildKey(p, b.token[i]), u.size());
    if (inserted) {
      u.token.push_back(b.token[i]);
      u.parent.push_back(p);
      u.prob.push_back(b.prob[i]);
    } else {
      u.prob[it->second] = std::max(u.prob[it->second], b.prob[i]);
    }
    b_to_u[i] = it->second;
  }
  const int32_t n = static_cast<int32_t>(u.token.size());
  u.path_prob.resize(n);
  for (int32_t i = 0; i < n; ++i)
    u.path_prob[i] = u.parent[i] < 0 ? u.prob[i] : u.path_prob[u.parent[i]] * u.prob[i];

  std::vector<int32_t> keep(n);
  std::iota(keep.begin(), keep.end(), 0);
  if (n > budget) {
    std::partial_sort(keep.begin(), keep.begin() + budget, keep.end(), [&](int32_t x, int32_t y) {
      return u.path_prob[x] != u.path_prob[y] ? u.path_prob[x] > u.path_prob[y] : x < y;
    });
    keep.resize(budget);
    std::sort(keep.begin(), keep.end());  // back to parents-first order
  }
  std::vector<int32_t> u_to_out(n, -1);
  for (int32_t i : keep) {
    const int32_t p = u.parent[i] < 0 ? -1 : u_to_out[u.parent[i]];
    // A kept node's parent is always kept (path_prob never grows along a path and ties
    // go to the lower index); the check guards against NaN input.
    if (u.parent[i] >= 0 && p < 0) continue;
    u_to_out[i] = out->Add(p, u.token[i], u.prob[i]);
  }
}

std::string ValidateTrie(const CandidateTrie& t) {
  const size_t n = t.token.size();
  if (t.parent.size() != n || t.prob.size() != n || t.path_prob.size() != n)
    return "array sizes differ";
  std::unordered_map<uint64_t, int32_t> seen;
  for (size_t i = 0; i < n; ++i) {
    const int32_t p = t.parent[i];
    const std::string at = "node " + std::to_string(i) + ": ";
    if (p < -1 || p >= static_cast<int32_t>(i)) return at + "parent not before child";
    if (!(t.prob[i] > 0.0f && t.prob[i] <= 1.0f)) return at + "prob not in (0, 1]";
    const float expect = p < 0 ? t.prob[i] : t.path_prob[p] * t.prob[i];
    if (std::fabs(expect - t.path_prob[i]) > 1e-6f * std::max(1.0f, expect))
      return at + "path_prob != parent's path_prob * prob";
    if (t.token[i] < 0) return at + "negative token";
    if (!seen.emplace(ChildKey(p, t.token[i]), static_cast<int32_t>(i)).second)
      return at + "duplicate sibling token";
  }
  return "";
}

}  // namespace graft
