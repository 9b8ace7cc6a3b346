#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace graft::cli {

ProgressBar::ProgressBar(ProgressOptions options, std::FILE* out)
    : o_(std::move(options)), out_(out), tty_(isatty(fileno(out)) != 0), t0_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::Clock(double seconds) {
  const long v = static_cast<long>(std::max(seconds, 0.0) + 0.5);
  char buf[32];
  if (v >= 3600) std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
  else std::snprintf(buf, sizeof(buf), "%ld:%02ld", v / 60, v % 60);
  return buf;
}

void ProgressBar::Update(double fraction, const std::string& detail) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  const int pct = static_cast<int>(f * 100 + 1e-9);
  const int step = tty_ ? o_.tty_step : o_.line_step;
  const bool first_100 = pct == 100 && last_pct_ != 100;
  if (last_pct_ >= 0 && step > 0 && std::abs(pct - last_pct_) < step && !first_100) return;
  if (last_pct_ == 100 && pct == 100 && step > 0) return;
  last_pct_ = pct;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int fill = static_cast<int>(f * o_.width + 0.5);
  const std::string bar = std::string(fill, '#') + std::string(o_.width - fill, '.');
  char buf[160];
  std::snprintf(buf, sizeof(buf), "[%s] %3d%% ", bar.c_str(), pct);
  Draw((o_.prefix.empty() ? "" : o_.prefix + " ") + buf + detail + " | " + Clock(elapsed) + " elapsed, ETA " +
       (f > 0 ? Clock(elapsed * (1 - f) / f) : std::string("?")));
}

void ProgressBar::Message(const std::string& text) {
  t0_ = std::chrono::steady_clock::now();
  last_pct_ = -1;
  Draw((o_.prefix.empty() ? "" : o_.prefix + ": ") + text);
}

void ProgressBar::Finish() {
  if (open_) std::fputc('\n', out_);
  open_ = false;
  std::fflush(out_);
}

void ProgressBar::Draw(const std::string& line) {
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    open_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace graft::cli
