// Server counters in Prometheus' text format (GET /metrics). Thread-safe: every
// method takes one mutex; updates are a few map/array increments per request.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "graft/engine.h"

namespace graft::server {

// Gauges read at render time.
struct QueueGauges {
  int32_t queued = 0;     // admitted, waiting for a slot
  int32_t in_flight = 0;  // generating now
  int32_t slots = 0;      // engines (--parallel)
};

class Metrics {
 public:
  // One finished HTTP exchange (any path, any status).
  void CountHttp(const std::string& path, int status);

  // One generation that ran on an engine. `finish` is "stop", "length",
  // "cancelled" (client went away or shutdown) or "error"; times in ms.
  void CountGeneration(const GenerationStats& st, Method m, const std::string& finish, double queue_ms,
                       double first_token_ms);
  // One step of the engine group, `ms` long: one target pass over every running request
  // (`target_pass_ms` of it), after `draft_passes` draft passes shared by the requests
  // that drafted (`draft_ms` of it, the drafts' prompt prefills included).
  void CountStep(double ms, int64_t draft_passes, double target_pass_ms, double draft_ms);
  // A request that was dropped before it reached an engine (client gone / shutdown).
  void CountDropped();
  // A request refused because the wait queue was full.
  void CountRejected();

  std::string Render(const QueueGauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> http_;    // (path, status) -> count
  std::map<std::pair<std::string, std::string>, int64_t> finish_;  // (method, finish) -> count
  int64_t dropped_ = 0;           // cancelled while queued
  int64_t rejected_ = 0;          // queue full
  int64_t prompt_tokens_ = 0;
  int64_t prompt_tokens_cached_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t target_passes_ = 0;     // verification passes, for the overall tau
  int64_t draft_passes_ = 0;
  std::array<int64_t, kNumSources> proposed_{};  // by Source
  std::array<int64_t, kNumSources> accepted_{};
  std::array<double, 7> phase_ms_{};  // prefill draft retrieve graft verify commit decode
  double queue_ms_sum_ = 0;
  int64_t queue_count_ = 0;
  double ttft_ms_sum_ = 0;        // engine start to first token, over generations with one
  int64_t ttft_count_ = 0;
  int64_t steps_ = 0;             // engine-group steps (target passes shared by the requests)
  double busy_ms_ = 0;            // wall time in those steps
  int64_t step_draft_passes_ = 0;  // draft passes those steps ran (each shared by its drafts)
  double step_target_ms_ = 0;     // of busy_ms_: the shared target passes
  double step_draft_ms_ = 0;      // of busy_ms_: drafting
  std::deque<double> recent_tps_; // tokens/s of the last kRecent generations (whole request)
  static constexpr size_t kRecent = 128;
};

}  // namespace graft::server
