#include "server/text_stream.h"

#include <algorithm>

namespace graft::server {

size_t CompleteUtf8Prefix(const std::string& s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return back < need ? n - back : n;  // lead byte without all its continuations
  }
  return n;  // only continuation bytes (invalid anyway): release them
}

TextStream::TextStream(std::vector<std::string> stop) {
  for (auto& s : stop) {
    if (s.empty()) continue;
    max_stop_ = std::max(max_stop_, s.size());
    stop_.push_back(std::move(s));
  }
}

std::string TextStream::Push(const std::string& piece) {
  if (stopped_) return "";
  held_ += piece;
  // A stop sequence can only start within the last max_stop_ - 1 bytes of what was
  // held before, or in the new piece: held_ never keeps more than that plus an
  // incomplete UTF-8 tail, so searching all of held_ is cheap.
  size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, held_.find(s));
  size_t release;
  if (first != std::string::npos) {
    stopped_ = true;
    release = first;
  } else {
    // Hold back the longest suffix that is a proper prefix of some stop sequence.
    size_t keep = 0;
    for (const auto& s : stop_) {
      for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
        if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
      }
    }
    release = CompleteUtf8Prefix(held_.substr(0, held_.size() - keep));
  }
  std::string out = held_.substr(0, release);
  held_.erase(0, stopped_ ? std::string::npos : release);
  text_ += out;
  return out;
}

std::string TextStream::Finish() {
  if (stopped_) return "";
  std::string out;
  out.swap(held_);
  text_ += out;
  return out;
}

}  // namespace graft::server
