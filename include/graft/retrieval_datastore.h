// Corpus datastore (docs/design.md §2, "REST"): a token-level suffix array over a large token
// array, built offline, stored in a versioned file and memory-mapped read-only.
// Pure C++: no llama.h.
//
// File format, version 1, little-endian (see datastore.cc for the exact header struct):
//   [0, 128)          header: magic "GRAFTIDX", version u32, header_bytes u32,
//                     tokenizer_fingerprint u64, num_tokens u64, num_documents u64,
//                     tokens_offset u64, sa_offset u64, file_bytes u64,
//                     tokens_checksum u64, sa_checksum u64, separator i32, sa_entry_bytes u32,
//                     reserved, header_checksum u64 (XXH64 of bytes [0, 120))
//   [128, 128 + 4n)   tokens, int32 (documents joined by kSeparator = -1)
//   [sa_offset, +4n)  suffix array, uint32, sa_offset 64-byte aligned
// Checksums are XXH64 (seed 0, libxxhash; `xxhsum -H1` of a section gives the same value;
// tests/data/golden_v1.idx pins the format). Open() checks the header checksum and the tokens
// checksum (~20 ms per 50M tokens once the pages are cached); the suffix array's checksum
// is checked by Verify() only, and queries bounds-check suffix array entries, so a
// corrupted suffix array gives wrong candidates, never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "graft/retrieval.h"

namespace graft {

inline constexpr uint32_t kDatastoreVersion = 1;
inline constexpr Token kDatastoreSeparator = -1;  // joins documents; never matches
inline constexpr Token kDatastoreMaxToken = (1 << 24) - 2;  // largest token id accepted

// Builds the index of `tokens` (documents joined by kDatastoreSeparator; every other
// token in [0, kDatastoreMaxToken]) and writes it atomically: to path + ".tmp.<pid>",
// fsync, rename over `path`, fsync of the directory. On any failure (bad input, I/O
// error, an exception thrown by `progress`) the temporary file is removed, `path` is left
// as it was, and graft::Error (std::invalid_argument for bad tokens) is thrown.
// `progress` (may be empty) gets fractions in [0, 1], non-decreasing, 1 at the end.
// Cost: suffix sorting by libdivsufsort over the tokens re-coded as 1-3 big-endian bytes
// of their dense rank (the width is the fewest bytes that hold the number of distinct
// tokens + 1), keeping the byte suffixes at multiples of the width. Peak memory about
// (5 * width + 4) bytes per token besides `tokens`. At most DatastoreMaxTokens(distinct
// tokens) tokens: more throw graft::Error (after the O(n) token scan, before any sort).
void BuildDatastore(TokenSpan tokens, uint64_t tokenizer_fingerprint, const std::string& path,
                    const std::function<void(double fraction)>& progress = {});

// The most tokens (separators included) one index of a corpus with `distinct_tokens`
// distinct token ids can hold. libdivsufsort's 32-bit interface sorts at most 2^31 - 1
// bytes (one is kept spare) and each token takes `width` bytes, so the limit is
// (2^31 - 2) / width: 2^31 - 2 tokens below 256 distinct tokens, 2^30 - 1 below 65536
// (most corpora), 715827882 (about 2^29.4) from 65536 on. O(1).
int64_t DatastoreMaxTokens(int64_t distinct_tokens);

struct DatastoreStats {
  int64_t tokens = 0;      // separators included
  int64_t documents = 0;
  int64_t file_bytes = 0;
  uint32_t version = 0;
  uint64_t tokenizer_fingerprint = 0;
};

// Defaults for corpus queries: shorter matches than the request index.
inline RetrievalOptions CorpusRetrievalOptions() {
  RetrievalOptions o;
  o.max_match = 16;
  o.max_occurrences = 64;
  return o;
}

class Datastore : public RetrievalSource {
 public:
  // Maps `path` read-only and checks it. Throws graft::Error, with a message saying what
  // is wrong and what to do, on a missing/unreadable file, a truncated file, a wrong
  // magic or version, a checksum mismatch, or (when expected_fingerprint != 0) a
  // tokenizer fingerprint different from expected_fingerprint.
  static std::unique_ptr<Datastore> Open(const std::string& path,
                                         uint64_t expected_fingerprint = 0,
                                         const RetrievalOptions& options = CorpusRetrievalOptions());
  ~Datastore() override;
  Datastore(const Datastore&) = delete;
  Datastore& operator=(const Datastore&) = delete;

  Source source() const override { return Source::kCorpus; }
  // The longest context suffix found (binary search over its length, each probe
  // O(m log n)), then the sample of its occurrences (strided over the suffix array range
  // when there are more than options.max_occurrences) is expanded as documented on
  // RetrievalOptions. Cost O(m log m log n + |S| log |S| + budget log budget).
  void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const override;

  // [lo, hi) of suffix array entries whose suffix starts with `pattern`. O(m log n).
  std::pair<int64_t, int64_t> FindRange(TokenSpan pattern) const;

  DatastoreStats Stats() const;
  TokenSpan tokens() const { return tokens_; }
  std::span<const uint32_t> suffix_array() const { return sa_; }
  const RetrievalOptions& options() const { return options_; }

  // Full check of the suffix array section against its checksum, and that every entry is
  // < num_tokens. Throws graft::Error on mismatch. O(n), ~1 GB/s.
  void Verify() const;
  // Suffix array is a permutation in sorted order. O(n * average LCP): for tests.
  std::string Validate() const;

 private:
  Datastore() = default;

  std::string path_;
  const uint8_t* map_ = nullptr;   // whole file, read-only
  size_t map_bytes_ = 0;
  TokenSpan tokens_;               // [n] inside map_
  std::span<const uint32_t> sa_;   // [n] inside map_
  DatastoreStats stats_;
  uint64_t sa_checksum_ = 0;
  RetrievalOptions options_;
};

}  // namespace graft
