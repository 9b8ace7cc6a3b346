// What this machine charges for speculation, learned online, and the two decisions
// the graft method takes from it each step. Pure C++ (no llama.h): tested without
// a model.
//
// On a CPU a target pass over N tree nodes costs far more than one token once N
// grows (measured here, Qwen2.5-Coder 1.5B Q4_K_M, 2 threads: N = 4 costs 2.7x,
// N = 8 4.4x, N = 16 5.2x a single token), and a draft-model level costs about half
// a target token. So the tree that maximises throughput is usually small, and the
// draft model pays only when it is accepted often. CostModel chooses the tree size
// that maximises expected tokens per millisecond; DraftGate decides whether to run
// the draft model at all from the throughput it has delivered.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace graft {

class CostModel {
 public:
  // `max_tree`: largest tree size that will be asked about.
  explicit CostModel(int32_t max_tree);

  // Seeds the curve from measured (N, ms) points (any order, N >= 1); sizes between
  // points are interpolated linearly, sizes past the last extrapolated with its
  // slope. Marks the model calibrated.
  void SetVerifyCurve(std::vector<std::pair<int32_t, double>> points);
  bool calibrated() const { return calibrated_; }

  // Folds one observed target pass into the curve (EMA per size). O(1).
  void ObserveVerify(int32_t n, double ms);
  // Expected ms of a target pass over n nodes (n clamped to [1, max_tree]). O(1).
  double VerifyMs(int32_t n) const;

  // `a`: acceptance probabilities of the candidate non-root nodes in descending
  // order (a parents-closed order, e.g. by PathAcceptance). Returns the tree size
  // n in [1, 1 + a.size()] (root included, at most max_n) maximising
  //   (1 + sum of the first n - 1 values of a) / (fixed_ms + VerifyMs(n)),
  // i.e. expected tokens per ms of this step (fixed_ms = its other costs). O(|a|).
  int32_t BestSize(std::span<const double> a, double fixed_ms, int32_t max_n) const;

 private:
  int32_t max_tree_;
  bool calibrated_ = false;
  std::vector<double> ms_;  // [max_tree + 1], ms_[n] = expected ms of n nodes; [0] unused
};

// Whether the draft model pays on this machine for this request: an epsilon-greedy
// choice between "draft" and "no draft" steps by the tokens per ms each has
// delivered (exponential moving averages), trying each arm at the start and the
// other one every `explore_every` steps (4x less often when it is 30% slower) so
// the estimate follows the text.
class DraftGate {
 public:
  explicit DraftGate(int32_t explore_every = 16, double ema = 0.15) : explore_every_(explore_every), ema_(ema) {}
  // Forgets the averages (a new request).
  void Reset();
  // Decision for the next step. O(1).
  bool ShouldDraft();
  // Feeds back one step: whether it drafted, tokens it emitted, its total ms. O(1).
  void Observe(bool drafted, int32_t tokens, double ms);
  double rate(bool drafted) const { return rate_[drafted ? 1 : 0]; }

 private:
  int32_t explore_every_;
  double ema_;
  double rate_[2] = {0, 0};  // tokens per ms: [0] no draft, [1] draft
  int32_t seen_[2] = {0, 0};
  int64_t step_ = 0;
};

}  // namespace graft
