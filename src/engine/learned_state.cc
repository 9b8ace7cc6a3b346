// The learned-state file: calibration counts per source, as JSON.
#include "graft/learned_state.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "graft/atomic_file.h"
#include "graft/cost_profile.h"
#include "graft/error.h"

namespace graft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kVersion = 1;
constexpr int kCellsPerSource = Calibration::kConfBuckets * Calibration::kDepthBuckets;

// Sources whose outcomes carry over: not the root (always accepted) and not the oracle
// (a benchmark's recorded answer).
bool Kept(Source s) { return s != Source::kRoot && s != Source::kOracle; }

}  // namespace

std::string LearnedStateKey(const Model& target, const Model* draft) {
  return "target " + ModelKey(target) + "; draft " + (draft != nullptr ? ModelKey(*draft) : "none");
}

std::string LearnedStatePath(const std::string& key, const std::string& dir) {
  char name[48];
  snprintf(name, sizeof(name), "learned-%016llx.json", static_cast<unsigned long long>(Fnv1a(key)));
  return (fs::path(dir.empty() ? DefaultProfileDir() : dir) / name).string();
}

void SaveLearnedState(const std::string& path, const LearnedState& state) {
  const CalibrationCounts& c = state.calibration;
  json sources = json::object();
  for (int s = 0; s < kNumSources; ++s) {
    if (!Kept(static_cast<Source>(s))) continue;
    const auto begin = static_cast<size_t>(s) * kCellsPerSource;
    if (c.trials.size() < begin + kCellsPerSource || c.accepts.size() < begin + kCellsPerSource ||
        c.confidence.size() <= static_cast<size_t>(s) || c.source_accepts.size() <= static_cast<size_t>(s)) {
      throw Error("cannot write the learned state " + path + ": calibration counts of the wrong shape");
    }
    std::vector<double> trials(c.trials.begin() + begin, c.trials.begin() + begin + kCellsPerSource);
    std::vector<double> accepts(c.accepts.begin() + begin, c.accepts.begin() + begin + kCellsPerSource);
    double n = 0;
    for (double t : trials) n += t;
    if (n <= 0) continue;
    sources[std::string(SourceName(static_cast<Source>(s)))] = {
        {"trials", trials}, {"accepts", accepts}, {"confidence", c.confidence[s]}, {"accepted", c.source_accepts[s]}};
  }
  const json j = {{"version", kVersion},
                  {"key", state.key},
                  {"saved_at", state.saved_at.empty() ? UtcTimestamp() : state.saved_at},
                  {"buckets", {{"confidence", Calibration::kConfBuckets}, {"depth", Calibration::kDepthBuckets}}},
                  {"calibration", sources}};
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw Error("cannot create the folder of the learned state " + path + ": " + ec.message());
  try {
    WriteFileAtomic(path, j.dump(1) + "\n");
  } catch (const Error& e) {
    throw Error(std::string("cannot write the learned state: ") + e.what());
  }
}

std::optional<LearnedState> LoadLearnedState(const std::string& path, const std::string& key) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  if (!in) throw Error("cannot read the learned state " + path);
  LearnedState st;
  try {
    const json j = json::parse(in);
    if (j.at("version").get<int>() != kVersion) throw Error("version " + j.at("version").dump() + ", not 1");
    st.key = j.at("key").get<std::string>();
    if (st.key != key) throw Error("it was learnt with other models (" + st.key + ")");
    const json& b = j.at("buckets");
    if (b.at("confidence").get<int>() != Calibration::kConfBuckets ||
        b.at("depth").get<int>() != Calibration::kDepthBuckets) {
      throw Error("its buckets differ from this build's");
    }
    st.saved_at = j.value("saved_at", "");
    CalibrationCounts& c = st.calibration;
    c.trials.assign(static_cast<size_t>(kNumSources) * kCellsPerSource, 0.0);
    c.accepts.assign(c.trials.size(), 0.0);
    c.confidence.assign(kNumSources, 0.0);
    c.source_accepts.assign(kNumSources, 0.0);
    for (const auto& [name, v] : j.at("calibration").items()) {
      int s = 0;
      while (s < kNumSources && SourceName(static_cast<Source>(s)) != name) ++s;
      if (s == kNumSources || !Kept(static_cast<Source>(s))) throw Error("unknown source \"" + name + "\"");
      const auto trials = v.at("trials").get<std::vector<double>>();
      const auto accepts = v.at("accepts").get<std::vector<double>>();
      if (trials.size() != kCellsPerSource || accepts.size() != kCellsPerSource) {
        throw Error("source \"" + name + "\" has " + std::to_string(trials.size()) + " cells, not " +
                    std::to_string(kCellsPerSource));
      }
      std::copy(trials.begin(), trials.end(), c.trials.begin() + static_cast<size_t>(s) * kCellsPerSource);
      std::copy(accepts.begin(), accepts.end(), c.accepts.begin() + static_cast<size_t>(s) * kCellsPerSource);
      c.confidence[s] = v.at("confidence").get<double>();
      c.source_accepts[s] = v.at("accepted").get<double>();
    }
    Calibration check;
    check.Restore(c);  // throws for counts out of range
  } catch (const std::exception& e) {  // graft::Error (ours) or nlohmann's
    throw Error("the learned state " + path + " is not usable: " + e.what());
  }
  return st;
}

}  // namespace graft
