// The one progress display of the CLI (`graft index build`, `graft bench`): a bar with
// the percentage, a caller's detail text, the elapsed time and an ETA, on stderr.
//   ProgressBar bar({.prefix = "index", .line_step = 10});
//   bar.Update(0.42, "tokenizing 12 documents");
//   -> index [##########..............]  42% tokenizing 12 documents | 0:03 elapsed, ETA 0:04
// On a terminal the line is redrawn in place; otherwise (logs, CI) each drawn update is
// a line of its own.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace graft::cli {

struct ProgressOptions {
  std::string prefix;  // first word of every line, e.g. "bench"
  int tty_step = 0;    // terminal: redraw once the percentage moved this many points (0 = every update)
  int line_step = 0;   // not a terminal: a new line once it moved this many points (0 = every update)
  int width = 24;      // bar characters
};

// Not thread-safe: callers that update from several threads hold a lock. Cost: one
// formatted write per drawn update.
class ProgressBar {
 public:
  explicit ProgressBar(ProgressOptions options, std::FILE* out = stderr);
  ~ProgressBar() { Finish(); }  // a redrawn line is ended before whatever comes next
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `fraction` in [0, 1] (clamped). 100% is drawn once even between steps; the ETA
  // is elapsed * (1 - fraction) / fraction, "?" until the fraction is above 0.
  void Update(double fraction, const std::string& detail);
  // "<prefix>: <text>" on a line of its own (a phase such as the warm-up); restarts the
  // clock so the ETA counts only what follows.
  void Message(const std::string& text);
  // Ends a line left open on a terminal. Idempotent.
  void Finish();

  // "m:ss", or "h:mm:ss" from an hour on (rounded to the second).
  static std::string Clock(double seconds);

 private:
  void Draw(const std::string& line);

  ProgressOptions o_;
  std::FILE* out_;
  bool tty_;
  bool open_ = false;   // a terminal line drawn and not yet ended
  int last_pct_ = -1;   // percentage last drawn, -1 = none
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace graft::cli
