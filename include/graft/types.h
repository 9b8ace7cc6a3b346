// Basic vocabulary types shared by every layer (tree, retrieval, verify, engine).
// Pure C++: nothing here knows about llama.h.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace graft {

using Token = int32_t;  // same width as llama_token
inline constexpr Token kNoToken = -1;

// Where a tree node came from. Stored per node, used for statistics and for the
// per-source acceptance calibration.
enum class Source : uint8_t {
  kRoot = 0,     // the last committed token (node 0 of every tree)
  kDraft = 1,    // draft model
  kRequest = 2,  // request-local + history suffix index ("suffix")
  kCorpus = 3,   // corpus suffix-array datastore ("rest")
  kRecycle = 4,  // next-token table learned from verification logits
  kPld = 5,      // prompt lookup (n-gram match)
  kOracle = 6,   // recorded target output (benchmark upper bound)
};
inline constexpr int kNumSources = 7;

constexpr std::string_view SourceName(Source s) {
  switch (s) {
    case Source::kRoot: return "root";
    case Source::kDraft: return "draft";
    case Source::kRequest: return "suffix";
    case Source::kCorpus: return "rest";
    case Source::kRecycle: return "recycle";
    case Source::kPld: return "pld";
    case Source::kOracle: return "oracle";
  }
  return "?";
}

using TokenSpan = std::span<const Token>;

}  // namespace graft
