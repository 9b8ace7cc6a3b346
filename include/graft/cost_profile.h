// What this machine charges for a target or draft pass, by the number of rows in it.
//
// The graft policy sizes trees and decides whether to draft from these curves, so
// they are measured once per (model files, threads, machine, llama.cpp build) and
// cached on disk: two runs with the same profile take the same decisions and, with
// the same seed, produce the same tokens. `graft tune` re-measures on demand.
//
//   CostProfile p = LoadOrMeasureCostProfile(target, draft, {.n_threads = 2});
//   p.verify_ms[16]   // ms of one target pass over 16 rows
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "graft/backend.h"

namespace graft {

struct CostProfileOptions {
  int32_t n_threads = 2;
  int32_t max_rows = 32;     // largest target pass measured (N = 1..max_rows)
  int32_t max_draft_rows = 8;  // largest draft pass measured
  int32_t prefix = 256;      // tokens already in the cache when a pass is timed
  // A second, longer cache: some sizes are timed there too, to price how passes grow
  // with the context (ContextCost in engine/cost_model.h). 0 = not measured.
  int32_t long_prefix = 1536;
  int32_t repeats = 3;       // passes per size; the median is kept
  // The target's passes as engines with EngineConfig::lazy_logits run them: each
  // timed up to its root's logits, the row every verification reads.
  bool lazy_logits = true;
  // Cache folder; "" = $GRAFT_PROFILE_DIR, else $HOME/.cache/graft/profiles.
  std::string dir;
  // Called by LoadOrMeasureCostProfile just before it measures (no cached profile
  // fits), with the file it will write: the measurement takes a minute or more on a
  // small CPU, so a front end can say why its first request waits. Not called when a
  // cached profile is read.
  std::function<void(const std::string& path)> on_measure;
};

struct CostProfile {
  // Everything the curves depend on, as text (models' names, sizes and vocabulary
  // fingerprints, threads, CPU, llama.cpp build). Profiles with equal keys are
  // interchangeable; the file name is a hash of it.
  std::string key;
  std::vector<double> verify_ms;  // [max_rows + 1]; [n] = one target pass over n rows; [0] = 0
  std::vector<double> draft_ms;   // [max_draft_rows + 1]; draft passes; empty without a draft
  int32_t prefix = 0;             // tokens in the cache when verify_ms and draft_ms were timed
  // The same at `long_prefix` tokens (0 = none), for some sizes: [n] = 0 where not timed.
  int32_t long_prefix = 0;
  std::vector<double> verify_ms_long, draft_ms_long;
  // With lazy_logits: ms of reading one more row's logits after the root's (its output
  // layer); 0 when the output layer runs for every row (verify_ms includes it).
  double read_row_ms = 0;
  // With lazy_logits: ms of each further row read in one product with the one asked
  // for (Context::HintReads): the mean over the largest product measured; 0 when not
  // measured.
  double read_ahead_ms = 0;
  // With lazy_logits: [c] = ms of one product over c rows' logits, c = 1 ..
  // Context::kMaxReadBlock (fewer when max_rows is smaller; [0] = 0, [1] =
  // read_row_ms); empty before version 7. CostModel::SetReadProducts.
  std::vector<double> read_product_ms;
  std::string measured_at;        // ISO date of the measurement
};

// One model in a cache key: its name, description, file size and vocabulary fingerprint.
std::string ModelKey(const Model& model);

// 64-bit FNV-1a of `s`: cache file names from keys.
uint64_t Fnv1a(const std::string& s);

// Now, as ISO 8601 UTC ("2026-12-02T13:11:05Z"): when a cached file was written.
std::string UtcTimestamp();

// $GRAFT_PROFILE_DIR, else $HOME/.cache/graft/profiles.
std::string DefaultProfileDir();

// The cache key for these models on this machine (see CostProfile::key).
std::string CostProfileKey(const Model& target, const Model* draft, const CostProfileOptions& options);

// Path of the cached profile for `key` in `options.dir` (or its default).
std::string CostProfilePath(const std::string& key, const CostProfileOptions& options);

// Times passes over random trees of 1..max_rows nodes on a scratch context of each
// model (median of `repeats`, after a warm-up; see MedianCurves), rounded to 1 us, and
// some sizes (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, ..., max_rows) on a second context of
// each holding `long_prefix` tokens; with lazy_logits also a product over each number
// of rows, 1 .. Context::kMaxReadBlock, read after the root (CostProfile::read_row_ms,
// read_product_ms). 100-120 s for the default 1.5B + 0.5B pair on a 2-core AMD EPYC.
CostProfile MeasureCostProfile(const Model& target, const Model* draft, const CostProfileOptions& options);

// One curve to measure: `time_pass(n)` runs one pass over n rows and returns its ms.
struct CurveSampler {
  int32_t max_rows = 0;
  std::function<double(int32_t n)> time_pass;
  std::vector<int32_t> sizes;  // the sizes to time, ascending, each in 1..max_rows; empty = every one
};

// The median of `repeats` timings of every size of every curve, rounded to 1 us and
// at least 1 us; result[c][n] for curves[c] (size max_rows + 1), 0 where n was not timed. The timings are
// taken in rounds, each round every size of every curve once, so that a slow spell of
// the machine (a neighbour on a shared VM; these machines drift by 1.5x over minutes)
// lands on one sample of many sizes, which the median drops, rather than on every
// sample of a few sizes (a bent curve, cached for good), and the target and draft
// curves see the same machine. With several curves, each curve's sizes in a round
// follow one untimed 1-row pass of it: llama.cpp's CPU threads spin for a while after
// a pass, and the first pass of one model after the other's shared the 2 cores with
// the other's spinning threads (measured on a 2-core EPYC: the target's 1-row pass
// 56-63 ms against 44-46 in plain decoding, the draft's 38 against 28; the other
// sizes were unaffected). Profiles measured so are priced as decoding runs. A curve's
// first four sizes are timed three times a round (before, between and after the two
// halves of its other sizes), so their medians are of 3 x `repeats` samples spread
// over the round: every ratio is taken against the 1-row pass, most steps verify that
// few rows, and single samples here spread by 10-20%. When they come after a half
// (when the curve's first size is 1), one untimed 1-row pass goes before them: a
// 1-row pass after a larger one pays for llama.cpp's graph rebuild (2 ms of 45 on a
// 2-core EPYC), and decoding's 1-row passes follow 1-row passes.
std::vector<std::vector<double>> MedianCurves(const std::vector<CurveSampler>& curves, int32_t repeats);

// `profile` as the JSON object it is cached as (its version, key, date and curves).
nlohmann::json CostProfileJson(const CostProfile& profile);

// The profile in `json` (CostProfileJson's fields; a profile before version 3 has no
// prefixes or long curves: 0 and empty). Checks only the long curves (no longer than
// their base, no negative value); throws graft::Error or a JSON exception otherwise
// or when a curve is missing. Callers check the version, key and sizes they need.
CostProfile CostProfileFromJson(const nlohmann::json& json);

// Writes `profile` atomically (temporary file, then rename) to CostProfilePath.
// Throws graft::Error naming the file when it cannot.
void SaveCostProfile(const CostProfile& profile, const CostProfileOptions& options);

// The cached profile for these models, or a fresh measurement (then saved) when there
// is none, it is unreadable, or it lacks sizes that `options` asks for. A profile
// that cannot be saved is still returned (a warning goes to stderr). `measured_ms`,
// when not null, receives the time spent measuring (0 when loaded).
CostProfile LoadOrMeasureCostProfile(const Model& target, const Model* draft, const CostProfileOptions& options,
                                     double* measured_ms = nullptr);

}  // namespace graft
