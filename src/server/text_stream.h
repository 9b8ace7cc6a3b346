// Turns generated token pieces into the text a client may see: cuts at the first
// stop sequence (which may span tokens) and never releases an incomplete UTF-8
// sequence. Pure C++, no model: the server feeds it TokenToPiece() strings.
//
//   TextStream ts({"\n\n"});
//   std::string delta = ts.Push(piece);   // text safe to send now (maybe "")
//   if (ts.stopped()) ...                 // a stop sequence appeared; delta ends before it
//   delta += ts.Finish();                 // at the end: whatever was held back
#pragma once

#include <string>
#include <vector>

namespace graft::server {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {});

  // Appends `piece` and returns the newly releasable text. After a stop sequence
  // appears, returns the text before it (once) and "" for every later call.
  // Cost: O(|piece| + |held| * n_stop * max_stop_len) per call.
  std::string Push(const std::string& piece);

  // Releases the held-back tail (a partial stop match, or an incomplete UTF-8
  // sequence at the very end, which the JSON writer then replaces). "" once stopped.
  std::string Finish();

  bool stopped() const { return stopped_; }
  // Everything released so far (Push and Finish results concatenated).
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stop_;  // non-empty stop sequences
  size_t max_stop_ = 0;            // longest stop sequence in bytes
  std::string text_;               // released text
  std::string held_;               // received but not yet released (partial stop / UTF-8)
  bool stopped_ = false;
};

// Length of the longest prefix of `s` that ends on a UTF-8 character boundary,
// i.e. `s.size()` minus an incomplete trailing multi-byte sequence. O(1).
size_t CompleteUtf8Prefix(const std::string& s);

}  // namespace graft::server
