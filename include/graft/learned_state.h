// What an engine learns that is worth keeping between runs: its acceptance
// calibration (graft/calibration.h), how far each retrieval source and the draft model
// are accepted at each confidence and depth. A fresh engine otherwise pays for that
// knowledge on its first request: it tries every source at face value until it has
// seen it fail, and on a CPU where a second row costs half a pass, that exploration
// alone made a single chat prompt 7% slower than plain decoding.
//
// The state holds counts only (no text, no tokens), per pair of models (the draft
// counts as part of the key), in a small JSON file beside the cost profiles:
//
//   ~/.cache/graft/profiles/learned-<hash of LearnedStateKey>.json
//
// Files are written atomically; a file that is missing starts the engine cold, one
// that is malformed or for other models is reported and ignored.
#pragma once

#include <optional>
#include <string>

#include "graft/backend.h"
#include "graft/calibration.h"

namespace graft {

struct LearnedState {
  std::string key;                 // LearnedStateKey of the models it was learnt with
  CalibrationCounts calibration;   // Calibration::Counts()
  std::string saved_at;            // ISO time of the save
};

// A loaded state weighs at most this many trials per source against a request's own
// outcomes (Calibration::CapTrials): a prior, soon outweighed where the workload differs.
inline constexpr double kLearnedPriorTrials = 64;
// A saved state holds at most this many trials per source: older runs fade as new
// ones are added.
inline constexpr double kLearnedKeepTrials = 1024;

// "target <ModelKey>; draft <ModelKey or none>". Acceptance depends on the models, not
// on the machine or the threads.
std::string LearnedStateKey(const Model& target, const Model* draft);

// <dir>/learned-<016x hash of key>.json; dir "" = DefaultProfileDir().
std::string LearnedStatePath(const std::string& key, const std::string& dir);

// Writes `state` to `path` atomically (graft/atomic_file.h), creating its folder.
// Throws graft::Error naming the file when it cannot.
void SaveLearnedState(const std::string& path, const LearnedState& state);

// The state at `path`; nullopt when there is no such file. Throws graft::Error naming
// the file when it cannot be read, is not a learned state of this version, holds
// counts out of range, or was learnt with other models (its key is not `key`).
std::optional<LearnedState> LoadLearnedState(const std::string& path, const std::string& key);

}  // namespace graft
