// Calibration: online (source, confidence, depth) -> acceptance statistics.
#include "graft/calibration.h"

#include <algorithm>
#include <cmath>

#include "graft/error.h"

namespace graft {
namespace {

double ClampProb(float p) {
  if (!(p > 0.0f)) return 0.0;  // also maps NaN to 0
  return p >= 1.0f ? 1.0 : static_cast<double>(p);
}

}  // namespace

int Calibration::ConfBucket(float edge_prob) {
  const int b = static_cast<int>(ClampProb(edge_prob) * kConfBuckets);
  return std::min(b, kConfBuckets - 1);
}

int Calibration::DepthBucket(int depth) {
  return std::clamp(depth, 1, kDepthBuckets) - 1;
}

void Calibration::Record(Source source, float edge_prob, int depth, bool accepted) {
  if (source == Source::kRoot) return;
  const int s = static_cast<int>(source);
  const int c = ConfBucket(edge_prob);
  const int d = DepthBucket(depth);
  const double a = accepted ? 1.0 : 0.0;
  Cell& f = fine_[FineIndex(s, c, d)];
  f.trials += 1;
  f.accepts += a;
  Cell& k = coarse_[CoarseIndex(s, c)];
  k.trials += 1;
  k.accepts += a;
  SourceCell& sc = source_[s];
  sc.confidence += ClampProb(edge_prob);
  sc.accepts += a;
}

double Calibration::SourceScale(int s) const {
  const SourceCell& sc = source_[s];
  const double k = kSourcePrior;
  return (k * options_.source_scale_prior + sc.accepts) / (k + sc.confidence);
}

void Calibration::BeginRequest() { request_.fill(SourceCell{}); }

void Calibration::RecordRequest(Source source, double expected, bool accepted) {
  if (source == Source::kRoot || !(expected >= 0)) return;
  SourceCell& r = request_[static_cast<int>(source)];
  r.confidence += std::min(expected, 1.0);
  r.accepts += accepted ? 1.0 : 0.0;
}

double Calibration::PooledEstimate(Source source, float edge_prob, int depth) const {
  if (source == Source::kRoot) return 1.0;
  return Pooled(static_cast<int>(source), ConfBucket(edge_prob), DepthBucket(depth), ClampProb(edge_prob));
}

double Calibration::Estimate(Source source, float edge_prob, int depth) const {
  if (source == Source::kRoot) return 1.0;
  const int s = static_cast<int>(source);
  double e = Pooled(s, ConfBucket(edge_prob), DepthBucket(depth), ClampProb(edge_prob));
  const double kr = options_.request_strength;
  if (kr > 0) {
    e *= std::min(1.0, (kr + 1 + request_[s].accepts) / (kr + request_[s].confidence));
  }
  return std::clamp(e, 0.0, 1.0);
}

double Calibration::Pooled(int s, int c, int d, double face) const {
  const Cell& k = coarse_[CoarseIndex(s, c)];
  const Cell& f = fine_[FineIndex(s, c, d)];
  const double k0 = std::max(options_.prior_strength, 1e-9);
  const double k1 = std::max(options_.backoff_strength, 1e-9);
  // An untried cell starts at the source's own confidence and moves to the scaled one
  // as it is tried: the scale learnt on other cells (short, common matches) must not
  // lock out a cell that was never tested (long matches), or it would never be.
  const double scaled = std::min(1.0, face * SourceScale(s));
  const double ke = options_.explore_strength;
  const double centre = ke > 0 ? (ke * std::max(face, scaled) + k.trials * scaled) / (ke + k.trials) : scaled;
  const double coarse = (k0 * centre + k.accepts) / (k0 + k.trials);
  const double fine = (k1 * coarse + f.accepts) / (k1 + f.trials);
  return std::clamp(fine, 0.0, 1.0);
}

double Calibration::Trials(Source source, float edge_prob, int depth) const {
  return fine_[FineIndex(static_cast<int>(source), ConfBucket(edge_prob), DepthBucket(depth))]
      .trials;
}

double Calibration::SourceTrials(Source source) const {
  double t = 0;
  for (int c = 0; c < kConfBuckets; ++c) t += coarse_[CoarseIndex(static_cast<int>(source), c)].trials;
  return t;
}

double Calibration::SourceAccepts(Source source) const {
  double t = 0;
  for (int c = 0; c < kConfBuckets; ++c) t += coarse_[CoarseIndex(static_cast<int>(source), c)].accepts;
  return t;
}

void Calibration::Decay(double factor) {
  factor = std::clamp(factor, 0.0, 1.0);
  for (Cell& x : fine_) { x.trials *= factor; x.accepts *= factor; }
  for (Cell& x : coarse_) { x.trials *= factor; x.accepts *= factor; }
  for (SourceCell& x : source_) { x.confidence *= factor; x.accepts *= factor; }
}

void Calibration::Clear() {
  request_.fill(SourceCell{});
  fine_.fill(Cell{});
  coarse_.fill(Cell{});
  source_.fill(SourceCell{});
}

CalibrationCounts Calibration::Counts() const {
  CalibrationCounts c;
  c.trials.resize(kCells);
  c.accepts.resize(kCells);
  for (int i = 0; i < kCells; ++i) {
    c.trials[i] = fine_[i].trials;
    c.accepts[i] = fine_[i].accepts;
  }
  for (const SourceCell& x : source_) {
    c.confidence.push_back(x.confidence);
    c.source_accepts.push_back(x.accepts);
  }
  return c;
}

void Calibration::Restore(const CalibrationCounts& c) {
  if (c.trials.size() != kCells || c.accepts.size() != kCells || c.confidence.size() != kNumSources ||
      c.source_accepts.size() != kNumSources) {
    throw Error("calibration counts of the wrong shape");
  }
  auto ok = [](double v) { return std::isfinite(v) && v >= 0; };
  for (int i = 0; i < kCells; ++i) {
    if (!ok(c.trials[i]) || !ok(c.accepts[i]) || c.accepts[i] > c.trials[i] * (1 + 1e-9)) {
      throw Error("calibration counts out of range");
    }
  }
  for (int s = 0; s < kNumSources; ++s) {
    if (!ok(c.confidence[s]) || !ok(c.source_accepts[s])) throw Error("calibration counts out of range");
  }
  Clear();
  for (int i = 0; i < kCells; ++i) {
    fine_[i] = Cell{c.trials[i], c.accepts[i]};
    Cell& k = coarse_[i / kDepthBuckets];
    k.trials += c.trials[i];
    k.accepts += c.accepts[i];
  }
  for (int s = 0; s < kNumSources; ++s) source_[s] = SourceCell{c.confidence[s], c.source_accepts[s]};
}

void Calibration::CapTrials(double max_trials) {
  for (int s = 0; s < kNumSources; ++s) {
    const double n = SourceTrials(static_cast<Source>(s));
    if (n <= max_trials || n <= 0) continue;
    const double f = std::max(0.0, max_trials) / n;
    for (int c = 0; c < kConfBuckets; ++c) {
      Cell& k = coarse_[CoarseIndex(s, c)];
      k.trials *= f;
      k.accepts *= f;
      for (int d = 0; d < kDepthBuckets; ++d) {
        Cell& x = fine_[FineIndex(s, c, d)];
        x.trials *= f;
        x.accepts *= f;
      }
    }
    source_[s].confidence *= f;
    source_[s].accepts *= f;
  }
}

std::vector<double> PathAcceptance(const TokenTree& tree, const Calibration& calibration) {
  std::vector<double> a(tree.token.size(), 1.0);
  // Siblings carry distinct tokens, so at most one of them is accepted: each edge gets
  // at most the probability mass its earlier siblings left (index order).
  std::vector<double> mass(tree.token.size(), 0.0);  // edge estimates of a node's children so far
  for (int32_t i = 1; i < tree.size(); ++i) {
    const int32_t p = tree.parent[i];
    const double edge = std::min(calibration.Estimate(tree.source[i], tree.prob[i], tree.depth[i]),
                                 std::max(0.0, 1.0 - mass[p]));
    mass[p] += edge;
    a[i] = a[p] * edge;
  }
  return a;
}

double SureFirstAcceptance(const TokenTree& tree, const std::vector<double>& a, const Calibration& calibration,
                           double min_trials) {
  int32_t best = -1;
  for (int32_t i = 1; i < tree.size() && i < static_cast<int32_t>(a.size()); ++i) {
    if (tree.parent[i] == 0 && (best < 0 || a[i] > a[best])) best = i;
  }
  if (best < 0 || calibration.Trials(tree.source[best], tree.prob[best], tree.depth[best]) < min_trials) return 0.0;
  return a[best];
}

double ExpectedAcceptedLength(const TokenTree& tree, const Calibration& calibration) {
  const std::vector<double> a = PathAcceptance(tree, calibration);
  double sum = 0;
  for (size_t i = 1; i < a.size(); ++i) sum += a[i];
  return sum;
}

}  // namespace graft
