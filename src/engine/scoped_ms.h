// Wall-time accounting for statistics (never for decisions: see cost_model.h).
#pragma once

#include <chrono>

namespace graft {

// Adds the wall time of its scope to `*total_ms`.
class ScopedMs {
 public:
  explicit ScopedMs(double* total_ms) : total_(total_ms), t0_(std::chrono::steady_clock::now()) {}
  ~ScopedMs() { *total_ += Elapsed(); }
  double Elapsed() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  double* total_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace graft
