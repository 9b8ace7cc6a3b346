// Online acceptance calibration: maps a node's (source, edge confidence, depth) to the
// probability that the target accepts it, learned from verification outcomes.
// Pure C++: no llama.h.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "graft/tree.h"
#include "graft/types.h"

namespace graft {

struct CalibrationOptions {
  // Strength (pseudo-counts) of the Beta prior of a coarse (source, confidence bucket)
  // cell. The prior is centred on the raw edge confidence, so with no data Estimate()
  // returns the source's own estimate and moves towards the observed rate as
  // observations accumulate (half-way after `prior_strength` observations).
  double prior_strength = 4.0;
  // Strength of the coarse cell's estimate as the prior of a fine
  // (source, confidence bucket, depth bucket) cell: a sparse fine cell backs off to
  // its coarse cell, a well-observed one follows its own rate.
  double backoff_strength = 4.0;
  // Prior r0 of a source's scale (how far its stated confidences are trusted before
  // any outcome). 1 = at face value. The engine uses 0.5: measured here, retrieval
  // sources over-promise (suffix trees: raw ~0.8, accepted 16-46% on chat prompts),
  // and on a CPU every verified node that fails costs real time.
  double source_scale_prior = 1.0;
  // Optimism for untried cells: a coarse cell's prior is centred on the raw confidence
  // (not below it) while it has few trials, and moves to the source-scaled centre as
  // its own trials reach `explore_strength`. 0 = always the scaled centre.
  double explore_strength = 0.0;
  // Trust in a source within one request (BeginRequest .. BeginRequest). The pooled
  // cells mix workloads: a summary copies its document, a math answer reuses short
  // phrases that other answers continued differently. Each source's estimates are
  // multiplied by min(1, (k + 1 + accepted) / (k + expected)) over its trials in this
  // request (RecordRequest; `expected` sums their pooled estimates): a source that has
  // fallen more than one acceptance short of what the pool expected here is trusted
  // less, and none is trusted more than the pool says. Replayed on 113 recorded outputs
  // (Spec-Bench, code edits, long documents) under three machines' profiles, k = 8 with
  // that one acceptance of grace was never worse than off by more than 3% on a set and
  // better by up to 8%; scaling up as well lost on long documents, and without the
  // grace a summary's few early misses kept it from copying. 0 = off.
  double request_strength = 0.0;
};

// Every count of a Calibration, for keeping what an engine learnt across runs
// (graft/learned_state.h). `trials` and `accepts` are per (source, confidence
// bucket, depth bucket), index (source * kConfBuckets + conf) * kDepthBuckets + depth;
// `confidence` and `source_accepts` per source (the scale's counts).
struct CalibrationCounts {
  std::vector<double> trials, accepts;
  std::vector<double> confidence, source_accepts;
};

// What an edge's confidence means differs per source (a draft model's softmax, a
// suffix index's count ratio) and drifts with the request, so acceptance is learned
// online, per source, in a grid of 10 confidence buckets (width 0.1 on the edge
// prob) x 8 depth buckets (depth 1..7, 8+).
//
// Outcome semantics (the caller's contract): Record a node only when it was tested,
// i.e. its parent was accepted in the verification pass; `accepted` says whether the
// node itself was then accepted. Nodes under a rejected parent were never tested and
// must not be recorded (they would bias every rate down). So Estimate() is
// P(node accepted | parent accepted): the calibrated *edge* acceptance, and the
// product of Estimate() along a path is the probability that the whole path is
// accepted (see PathAcceptance).
//
// Not thread-safe; one instance per engine state. Memory: fixed, about 9 KiB.
class Calibration {
 public:
  static constexpr int kConfBuckets = 10;   // buckets of width 0.1 on the edge prob
  static constexpr int kDepthBuckets = 8;   // depth 1..7 -> 0..6, depth >= 8 -> 7

  explicit Calibration(const CalibrationOptions& options = {}) : options_(options) {}

  // Records one tested node. `edge_prob` is the node's own (uncalibrated) edge
  // confidence, `depth` its depth (>= 1; 0 is treated as 1). Source kRoot is ignored. O(1).
  void Record(Source source, float edge_prob, int depth, bool accepted);

  // Starts a request: forgets the request-level evidence of request_strength. O(sources).
  void BeginRequest();

  // One request-level trial of `source` (request_strength): at one position it
  // proposed candidates whose pooled estimates (PooledEstimate) sum to `expected`
  // (at most 1: at most one of them can be right), and `accepted` says whether one was.
  // RecordOutcome makes one per (accepted parent, source). O(1).
  void RecordRequest(Source source, double expected, bool accepted);

  // Estimate without this request's scale: the pooled cells only. O(1).
  double PooledEstimate(Source source, float edge_prob, int depth) const;

  // Posterior mean acceptance of an edge, in [0, 1]. kRoot returns 1. O(1).
  // Three-level shrinkage: the source's scale r = (2 * r0 + accepts) / (2 + sum of raw
  // confidences) over all its trials (how optimistic the source's own numbers are;
  // shared by every bucket, so a source that over-promises is corrected after a few
  // trials); coarse = (k0 * min(1, r * p) + s_c) / (k0 + n_c) with p the clamped raw
  // confidence; fine = (k1 * coarse + s_f) / (k1 + n_f). (s, n) = accepts, trials.
  double Estimate(Source source, float edge_prob, int depth) const;

  // Observed counts, for statistics and tests. O(1) / O(buckets).
  double Trials(Source source, float edge_prob, int depth) const;
  double SourceTrials(Source source) const;
  double SourceAccepts(Source source) const;

  // Multiplies every count by `factor` in (0, 1]: exponential forgetting for drifting
  // requests. O(cells).
  void Decay(double factor);

  // Forgets everything. O(cells).
  void Clear();

  // Every count, and back: Restore replaces all of them (the coarse cells are the
  // sums of the fine ones). Restore throws graft::Error when the sizes do not match
  // or a count is negative, NaN or an accept count exceeds its trials, and then
  // changes nothing. O(cells).
  CalibrationCounts Counts() const;
  void Restore(const CalibrationCounts& counts);

  // Scales each source's counts down so that it holds at most `max_trials` trials:
  // its rates stay, their weight against new outcomes shrinks (a prior from earlier
  // runs that a request's own outcomes soon outweigh). O(cells).
  void CapTrials(double max_trials);

  const CalibrationOptions& options() const { return options_; }

  static int ConfBucket(float edge_prob);
  static int DepthBucket(int depth);

 private:
  struct Cell {
    double trials = 0;   // tested nodes that fell in this cell
    double accepts = 0;  // of those, how many the target accepted
  };
  static constexpr int kCells = kNumSources * kConfBuckets * kDepthBuckets;
  static int FineIndex(int s, int c, int d) { return (s * kConfBuckets + c) * kDepthBuckets + d; }
  static int CoarseIndex(int s, int c) { return s * kConfBuckets + c; }

  struct SourceCell {
    double confidence = 0;  // sum of the raw edge confidences of its tested nodes
    double accepts = 0;     // of those nodes, how many the target accepted
  };
  static constexpr double kSourcePrior = 2.0;  // pseudo-count of the source scale's prior
  double SourceScale(int s) const;
  double Pooled(int s, int c, int d, double face) const;  // Estimate before the request's scale

  CalibrationOptions options_;
  std::array<Cell, kCells> fine_{};                        // (source, conf, depth)
  std::array<Cell, kNumSources * kConfBuckets> coarse_{};  // (source, conf): sum over depth
  std::array<SourceCell, kNumSources> source_{};           // per source: all buckets
  std::array<SourceCell, kNumSources> request_{};  // this request: pooled estimates of tested nodes, accepts
};

// a(node) for every node: the product of calibrated edge acceptance along the path
// root..node (root = 1). Siblings carry distinct tokens, so at most one of them is
// accepted: a node's edge is min(Estimate, 1 - the edges of its earlier siblings, in
// index order), and a node's children never share more than one unit. (Without this,
// two sources that propose different tokens at 0.8 each would promise 1.6 tokens.)
// Non-increasing along every path. O(n).
std::vector<double> PathAcceptance(const TokenTree& tree, const Calibration& calibration);

// The path acceptance `a` (PathAcceptance) of the tree's likeliest first token, or 0
// when the fine cell that estimate comes from holds fewer than `min_trials` observed
// trials: a high estimate on thin evidence (a cold engine's few cut candidates) is no
// sure thing. For LossBudget's sure bets. O(n).
double SureFirstAcceptance(const TokenTree& tree, const std::vector<double>& a, const Calibration& calibration,
                           double min_trials);

// Expected number of accepted proposals of `tree` = sum over non-root nodes of a(node)
// (the bonus token is not counted). The objective Prune and Graft trade slots for. O(n).
double ExpectedAcceptedLength(const TokenTree& tree, const Calibration& calibration);

}  // namespace graft
