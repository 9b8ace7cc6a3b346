// What this machine charges for speculation, and the two decisions the graft method
// takes from it each step. Pure C++ (no llama.h): tested without a model.
//
// On a CPU a target pass over N tree nodes costs far more than one token once N
// grows (measured here, Qwen2.5-Coder 1.5B Q4_K_M, 2 threads: N = 4 costs 2.7x,
// N = 8 4.4x, N = 16 5.2x a single token; N = 15 costs more than N = 16 because
// llama.cpp's kernels work in row blocks), and a draft-model level costs about half
// a target token. So the tree that maximises throughput is usually small, and the
// draft model pays only when it is accepted often. CostModel chooses the tree size
// that maximises expected tokens per millisecond; DraftGate decides whether to run
// the draft model at all from the throughput it has delivered.
//
// Both take only deterministic inputs: the cost curves come from a cached profile
// (graft/cost_profile.h), not from timing the current run, and the gate is fed
// modelled step costs. So the same request, seed and profile give the same tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace graft {

class CostModel {
 public:
  // `verify_ms[n]`: ms of a target pass over n rows (n >= 1; [0] ignored), at least
  // one size; `draft_ms[n]` likewise for the draft model (may be empty).
  CostModel(std::vector<double> verify_ms, std::vector<double> draft_ms);

  // Expected ms of a target pass over n >= 1 rows: the measured value, or past the
  // last measured size the last value plus the mean slope of the last 4 sizes. O(1).
  double VerifyMs(int32_t n) const { return At(verify_ms_, n); }
  // The same for a draft pass (0 when no draft curve was given). O(1).
  double DraftMs(int32_t n) const { return draft_ms_.size() < 2 ? 0.0 : At(draft_ms_, n); }

  // `a`: acceptance probabilities of the candidate non-root nodes in descending
  // order (a parents-closed order, e.g. by PathAcceptance). Returns the tree size
  // n in [1, 1 + a.size()] (root included, at most max_n) maximising
  //   (1 + sum of the first n - 1 values of a) / (fixed_ms + VerifyMs(n)),
  // i.e. expected tokens per ms of this step (fixed_ms = its other costs). Because
  // every size is measured, a larger n that costs no more than a smaller one (a full
  // row block) wins whenever there are candidates to fill it. O(|a|).
  int32_t BestSize(std::span<const double> a, double fixed_ms, int32_t max_n) const;

 private:
  static double At(const std::vector<double>& ms, int32_t n);
  std::vector<double> verify_ms_;  // [sizes + 1], [0] unused
  std::vector<double> draft_ms_;   // [sizes + 1] or empty
};

// Whether the draft model pays on this machine: an epsilon-greedy choice between
// "draft" and "no draft" steps by the tokens per modelled ms each has delivered
// (exponential moving averages), trying each arm at the start and the other one
// every `explore_every` steps (4x less often when it is 30% slower) so the estimate
// follows the text. Deterministic: same observations, same decisions.
class DraftGate {
 public:
  explicit DraftGate(int32_t explore_every = 16, double ema = 0.15) : explore_every_(explore_every), ema_(ema) {}
  // Decision for the next step. O(1).
  bool ShouldDraft();
  // Feeds back one step: whether it drafted, tokens it emitted, its modelled ms. O(1).
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
