// Greedy and stochastic tree verification (the target's argmax or its position-keyed
// sample, followed through the tree).
#include "graft/verify.h"

#include <algorithm>
#include <stdexcept>

#include "verify_internal.h"

namespace graft {
namespace {

// children[i]: the children of node i in index order. O(n).
std::vector<std::vector<int32_t>> ChildLists(const TokenTree& tree) {
  std::vector<std::vector<int32_t>> children(tree.token.size());
  for (int32_t i = 1; i < tree.size(); ++i) children[tree.parent[i]].push_back(i);
  return children;
}

void CheckTree(const TokenTree& tree) {
  if (tree.size() == 0) throw std::invalid_argument("Verify: empty tree (no root)");
}

}  // namespace

std::vector<Token> VerifyResult::CommittedTokens(const TokenTree& tree) const {
  std::vector<Token> out;
  out.reserve(accepted.size());
  for (size_t i = 1; i < accepted.size(); ++i) out.push_back(tree.token[accepted[i]]);
  out.push_back(bonus);
  return out;
}

VerifyResult VerifyGreedy(const TokenTree& tree,
                          const std::function<Token(int32_t node)>& target_argmax) {
  CheckTree(tree);
  const auto children = ChildLists(tree);
  VerifyResult r;
  int32_t node = 0;
  r.accepted.push_back(node);
  while (true) {
    const Token want = target_argmax(node);
    int32_t next = -1;
    for (int32_t c : children[node]) {
      const bool ok = next < 0 && tree.token[c] == want;
      r.tested.push_back(c);
      r.tested_accepted.push_back(ok ? 1 : 0);
      if (ok) next = c;
    }
    if (next < 0) {
      r.bonus = want;
      return r;
    }
    node = next;
    r.accepted.push_back(node);
  }
}

namespace internal {

VerifyResult VerifyStochasticWithRule(const TokenTree& tree,
                                      const std::function<Distribution(int32_t node)>& target_dist,
                                      const PositionSampler& sampler, int64_t position, AcceptRule rule) {
  // The greedy walk with the target's sample at each node's position in place of its
  // argmax: accept the child equal to it, else it is the bonus.
  return VerifyGreedy(tree, [&](int32_t node) {
    const Distribution p = target_dist(node);
    if (p.token.empty()) throw std::invalid_argument("VerifyStochastic: empty target distribution");
    const int64_t at = (rule == AcceptRule::kBiasedForTest ? 0 : position) + tree.depth[node];
    return sampler.Sample(p, at);
  });
}

VerifyResult VerifyResidual(const TokenTree& tree, const std::function<Distribution(int32_t node)>& target_dist,
                            Rng& rng) {
  CheckTree(tree);
  const auto children = ChildLists(tree);
  VerifyResult r;
  int32_t node = 0;
  r.accepted.push_back(node);
  std::vector<Token> removed;  // tokens whose p_res was set to 0 at the current node
  while (true) {
    const Distribution p = target_dist(node);
    if (p.token.empty()) throw std::invalid_argument("VerifyResidual: empty target distribution");
    // remaining = sum of p over tokens not yet removed, recomputed exactly from the
    // entries (not 1 - removed mass) so that the last child with mass gets ratio 1.
    double remaining = 0;
    for (float q : p.prob) remaining += q;
    removed.clear();
    int32_t next = -1;
    const auto& kids = children[node];
    size_t k = 0;
    for (; k < kids.size(); ++k) {
      const int32_t c = kids[k];
      const Token x = tree.token[c];
      const bool already = std::find(removed.begin(), removed.end(), x) != removed.end();
      const double px = already ? 0.0 : static_cast<double>(p.Prob(x));
      const double accept_prob = remaining > 0 ? px / remaining : 0.0;
      const bool ok = px > 0 && rng.Uniform() < accept_prob;
      r.tested.push_back(c);
      r.tested_accepted.push_back(ok ? 1 : 0);
      if (ok) {
        next = c;
        break;
      }
      if (px > 0) {
        removed.push_back(x);
        remaining = 0;  // recompute over the survivors
        for (size_t i = 0; i < p.token.size(); ++i) {
          if (std::find(removed.begin(), removed.end(), p.token[i]) == removed.end()) {
            remaining += p.prob[i];
          }
        }
      }
    }
    if (next >= 0) {
      // The later siblings were not tried, but they are not accepted either: record them
      // so Calibration estimates P(accepted | parent accepted) for every child.
      for (++k; k < kids.size(); ++k) {
        r.tested.push_back(kids[k]);
        r.tested_accepted.push_back(0);
      }
      node = next;
      r.accepted.push_back(node);
      continue;
    }
    // Bonus from p_res: p with the rejected tokens removed (one Uniform()).
    const double u = rng.Uniform() * remaining;
    double cum = 0;
    Token bonus = kNoToken;
    for (size_t i = 0; i < p.token.size(); ++i) {
      if (p.prob[i] <= 0.0f ||
          std::find(removed.begin(), removed.end(), p.token[i]) != removed.end()) {
        continue;
      }
      cum += p.prob[i];
      bonus = p.token[i];
      if (u < cum) break;
    }
    if (bonus == kNoToken) {
      // Every token with mass was tried and rejected: impossible in exact arithmetic
      // (the last one has ratio 1).
      throw std::logic_error("VerifyResidual: empty residual distribution");
    }
    r.bonus = bonus;
    return r;
  }
}

}  // namespace internal

VerifyResult VerifyStochastic(const TokenTree& tree,
                              const std::function<Distribution(int32_t node)>& target_dist,
                              const PositionSampler& sampler, int64_t position) {
  return internal::VerifyStochasticWithRule(tree, target_dist, sampler, position, internal::AcceptRule::kTargetSample);
}

void RecordOutcome(const TokenTree& tree, const VerifyResult& result, Calibration* calibration) {
  // Request-level trials, one per (tested position, source): siblings exclude each
  // other, so a bushy position must count as one trial, not as many failures.
  struct Trial {
    int32_t parent;
    Source source;
    double expected;
    bool accepted;
  };
  std::vector<Trial> trials;
  const bool per_request = calibration->options().request_strength > 0;
  for (size_t i = 0; per_request && i < result.tested.size(); ++i) {
    const int32_t n = result.tested[i];
    const double e = calibration->PooledEstimate(tree.source[n], tree.prob[n], tree.depth[n]);
    auto t = std::find_if(trials.begin(), trials.end(),
                          [&](const Trial& x) { return x.parent == tree.parent[n] && x.source == tree.source[n]; });
    if (t == trials.end()) t = trials.insert(trials.end(), Trial{tree.parent[n], tree.source[n], 0.0, false});
    t->expected += e;
    t->accepted = t->accepted || result.tested_accepted[i] != 0;
  }
  for (size_t i = 0; i < result.tested.size(); ++i) {
    const int32_t n = result.tested[i];
    calibration->Record(tree.source[n], tree.prob[n], tree.depth[n], result.tested_accepted[i] != 0);
  }
  for (const Trial& t : trials) calibration->RecordRequest(t.source, t.expected, t.accepted);
}

}  // namespace graft
