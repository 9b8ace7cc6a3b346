#include "server/text_stream.h"

#include <gtest/gtest.h>

#include <random>

namespace graft::server {
namespace {

// Feeds `pieces` and returns every released chunk (after Finish, if not stopped).
std::vector<std::string> FeedAll(TextStream& ts, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const auto& p : pieces) {
    out.push_back(ts.Push(p));
    if (ts.stopped()) return out;
  }
  out.push_back(ts.Finish());
  return out;
}

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

TEST(TextStreamTest, NoStopPassesTextThrough) {
  TextStream ts;
  EXPECT_EQ(ts.Push("Hello"), "Hello");
  EXPECT_EQ(ts.Push(" world"), " world");
  EXPECT_EQ(ts.Finish(), "");
  EXPECT_EQ(ts.text(), "Hello world");
  EXPECT_FALSE(ts.stopped());
}

TEST(TextStreamTest, StopInsideOnePiece) {
  TextStream ts({"END"});
  EXPECT_EQ(ts.Push("abcENDdef"), "abc");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.Push("more"), "");
  EXPECT_EQ(ts.Finish(), "");
  EXPECT_EQ(ts.text(), "abc");
}

TEST(TextStreamTest, StopSpanningPiecesIsHeldThenCut) {
  TextStream ts({"\n\n"});
  EXPECT_EQ(ts.Push("one\n"), "one");  // "\n" may start the stop sequence
  EXPECT_EQ(ts.Push("\ntwo"), "");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.text(), "one");
}

TEST(TextStreamTest, PartialMatchThatFailsIsReleased) {
  TextStream ts({"STOP"});
  EXPECT_EQ(ts.Push("xST"), "x");
  EXPECT_EQ(ts.Push("O"), "");
  EXPECT_EQ(ts.Push("P!"), "");
  EXPECT_TRUE(ts.stopped());
  TextStream ts2({"STOP"});
  EXPECT_EQ(ts2.Push("xST"), "x");
  EXPECT_EQ(ts2.Push("OW"), "STOW");
  EXPECT_EQ(ts2.Finish(), "");
  EXPECT_EQ(ts2.text(), "xSTOW");
}

TEST(TextStreamTest, EarliestOfSeveralStopsWins) {
  TextStream ts({"bb", "a"});
  EXPECT_EQ(ts.Push("xbbya"), "x");
  EXPECT_EQ(ts.text(), "x");
}

TEST(TextStreamTest, HeldTailReleasedAtFinish) {
  TextStream ts({"abc"});
  EXPECT_EQ(ts.Push("xyab"), "xy");
  EXPECT_EQ(ts.Finish(), "ab");
  EXPECT_EQ(ts.text(), "xyab");
}

TEST(TextStreamTest, Utf8SplitAcrossTokensIsHeldBack) {
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  TextStream ts;
  EXPECT_EQ(ts.Push("a\xE2"), "a");
  EXPECT_EQ(ts.Push("\x82"), "");
  EXPECT_EQ(ts.Push("\xAC" "b"), euro + "b");
  EXPECT_EQ(ts.text(), "a" + euro + "b");
}

TEST(TextStreamTest, CompleteUtf8Prefix) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xF0\x9F\x98"), 1u);       // 4-byte emoji missing its last byte
  EXPECT_EQ(CompleteUtf8Prefix("a\xF0\x9F\x98\x80"), 5u);   // complete
  EXPECT_EQ(CompleteUtf8Prefix("\xC3"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("\xC3\xA9"), 2u);
}

// Random pieces over a tiny alphabet with multi-byte characters: every chunk is
// valid UTF-8 and the concatenation equals the reference cut of the whole text.
TEST(TextStreamTest, RandomSplitsMatchReference) {
  const std::vector<std::string> chars = {"a", "b", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  const std::vector<std::string> stops = {"ab", "\xE2\x82\xAC" "a", "bb\xC3\xA9"};
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string whole;
    const int n = 1 + rng() % 12;
    for (int i = 0; i < n; ++i) whole += chars[rng() % chars.size()];
    std::vector<std::string> stop = {stops[rng() % stops.size()]};
    if (rng() % 2) stop.push_back(stops[rng() % stops.size()]);
    // Reference: cut at the earliest stop occurrence.
    size_t cut = std::string::npos;
    for (const auto& s : stop) cut = std::min(cut, whole.find(s));
    const std::string expect = whole.substr(0, cut);
    // Random byte-level split (may cut characters).
    std::vector<std::string> pieces;
    for (size_t i = 0; i < whole.size();) {
      const size_t len = 1 + rng() % 4;
      pieces.push_back(whole.substr(i, len));
      i += len;
    }
    TextStream ts(stop);
    std::string got;
    for (const auto& chunk : FeedAll(ts, pieces)) {
      ASSERT_TRUE(ValidUtf8(chunk)) << "iteration " << iter;
      got += chunk;
    }
    ASSERT_EQ(got, expect) << "iteration " << iter << " whole=" << whole;
    ASSERT_EQ(ts.stopped(), cut != std::string::npos);
  }
}

}  // namespace
}  // namespace graft::server
