#include "graft/retrieval_datastore.h"

#include <divsufsort.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "graft/error.h"
#include "retrieval/continuation.h"

namespace graft {

static_assert(std::endian::native == std::endian::little, "the index format is little-endian");

namespace {

constexpr char kMagic[8] = {'G', 'R', 'A', 'F', 'T', 'I', 'D', 'X'};
constexpr uint64_t kHeaderBytes = 128;
constexpr uint64_t kSectionAlign = 64;

struct FileHeader {
  char magic[8];                   // "GRAFTIDX"
  uint32_t version;                // kDatastoreVersion
  uint32_t header_bytes;           // 128
  uint64_t tokenizer_fingerprint;  // from the caller (the CLI hashes the model's vocab)
  uint64_t num_tokens;             // n, separators included
  uint64_t num_documents;
  uint64_t tokens_offset;          // 128
  uint64_t sa_offset;              // 64-byte aligned, after the tokens
  uint64_t file_bytes;             // exact file size
  uint64_t tokens_checksum;        // XXH64 of the 4n token bytes
  uint64_t sa_checksum;            // XXH64 of the 4n suffix array bytes
  int32_t separator;               // kDatastoreSeparator
  uint32_t sa_entry_bytes;         // 4
  uint8_t reserved[32];            // zero
  uint64_t header_checksum;        // XXH64 of bytes [0, 120)
};
static_assert(sizeof(FileHeader) == kHeaderBytes);

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// XXH64 with seed 0 (libxxhash), the checksum of every section: `xxhsum -H1` of the
// section's bytes gives the same value. ~1 byte/cycle or better, no allocation.
uint64_t Checksum(const void* data, size_t bytes) { return XXH64(data, bytes, 0); }

// libdivsufsort's 32-bit interface sorts at most 2^31 - 1 bytes; one byte is kept spare.
constexpr int64_t kMaxSortBytes = (int64_t{1} << 31) - 2;

// Bytes per token of the sort key: the fewest that hold the dense ranks 0..distinct.
int CodeWidth(int64_t distinct_tokens) {
  return distinct_tokens < 256 ? 1 : distinct_tokens < 65536 ? 2 : 3;
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Owns the temporary file until Commit(); removes it on destruction otherwise.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path)
      : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) Fail("cannot create " + tmp_);
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  void Write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t w = ::write(fd_, p, std::min<size_t>(bytes, size_t{1} << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) Fail("cannot write " + tmp_);
      p += w;
      bytes -= static_cast<size_t>(w);
    }
  }
  void Commit() {
    if (::fsync(fd_) != 0) Fail("cannot fsync " + tmp_);
    if (::close(fd_) != 0) { fd_ = -1; Fail("cannot close " + tmp_); }
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) Fail("cannot rename " + tmp_ + " to " + path_);
    committed_ = true;
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : path_.substr(0, std::max<size_t>(slash, 1));
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);  // best effort: the rename is durable once the directory is synced
      ::close(dfd);
    }
  }

 private:
  [[noreturn]] static void Fail(const std::string& what) {
    throw Error(what + ": " + std::strerror(errno) +
                " (check that the directory exists, is writable and has free space)");
  }
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

int64_t DatastoreMaxTokens(int64_t distinct_tokens) {
  return kMaxSortBytes / CodeWidth(distinct_tokens);
}

void BuildDatastore(TokenSpan tokens, uint64_t tokenizer_fingerprint, const std::string& path,
                    const std::function<void(double)>& progress) {
  auto report = [&](double f) { if (progress) progress(f); };
  report(0.0);
  const int64_t n = static_cast<int64_t>(tokens.size());
  // Dense, order-preserving ranks: separator -> 0, distinct tokens -> 1..D.
  Token max_token = -1;
  int64_t documents = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Token t = tokens[i];
    if (t == kDatastoreSeparator) {
      ++documents;
    } else if (t < 0 || t > kDatastoreMaxToken) {
      throw std::invalid_argument("BuildDatastore: token " + std::to_string(t) + " at " +
                                  std::to_string(i) + " is outside [0, " +
                                  std::to_string(kDatastoreMaxToken) + "] and not the separator");
    }
    max_token = std::max(max_token, t);
  }
  if (n > 0 && tokens[n - 1] != kDatastoreSeparator) ++documents;
  std::vector<uint32_t> rank(static_cast<size_t>(max_token) + 2, 0);  // [token + 1]
  for (int64_t i = 0; i < n; ++i) rank[static_cast<size_t>(tokens[i]) + 1] = 1;
  uint32_t distinct = 0;
  rank[0] = 0;  // the separator
  for (size_t v = 1; v < rank.size(); ++v) rank[v] = rank[v] ? ++distinct : 0;
  const int width = CodeWidth(distinct);
  if (n > DatastoreMaxTokens(distinct))
    throw Error("BuildDatastore: " + std::to_string(n) + " tokens is too many for one index: "
                "with " + std::to_string(distinct) + " distinct tokens the limit is " +
                std::to_string(DatastoreMaxTokens(distinct)) + " (2^31 - 2 sort bytes, " +
                std::to_string(width) + " per token); split the corpus");
  report(0.05);

  std::vector<uint32_t> sa(n);
  if (n > 0) {
    const int64_t bytes = width * n;
    std::vector<uint8_t> text(bytes);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t r = rank[static_cast<size_t>(tokens[i]) + 1];
      uint8_t* dst = text.data() + i * width;
      for (int b = 0; b < width; ++b) dst[b] = static_cast<uint8_t>(r >> (8 * (width - 1 - b)));
    }
    std::vector<uint32_t>().swap(rank);
    report(0.1);
    if (width == 1) {
      if (divsufsort(text.data(), reinterpret_cast<saidx_t*>(sa.data()), n) != 0)
        throw Error("BuildDatastore: suffix sorting failed (out of memory?)");
    } else {
      std::vector<saidx_t> byte_sa(bytes);
      if (divsufsort(text.data(), byte_sa.data(), bytes) != 0)
        throw Error("BuildDatastore: suffix sorting failed (out of memory?)");
      int64_t j = 0;
      for (int64_t i = 0; i < bytes; ++i)
        if (byte_sa[i] % width == 0) sa[j++] = static_cast<uint32_t>(byte_sa[i] / width);
      if (j != n) throw Error("internal error: suffix array compaction lost entries");
    }
  }
  report(0.8);

  FileHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kDatastoreVersion;
  h.header_bytes = kHeaderBytes;
  h.tokenizer_fingerprint = tokenizer_fingerprint;
  h.num_tokens = static_cast<uint64_t>(n);
  h.num_documents = static_cast<uint64_t>(documents);
  h.tokens_offset = kHeaderBytes;
  h.sa_offset = AlignUp(kHeaderBytes + 4 * static_cast<uint64_t>(n), kSectionAlign);
  h.file_bytes = h.sa_offset + 4 * static_cast<uint64_t>(n);
  h.tokens_checksum = Checksum(tokens.data(), 4 * static_cast<size_t>(n));
  h.sa_checksum = Checksum(sa.data(), 4 * static_cast<size_t>(n));
  h.separator = kDatastoreSeparator;
  h.sa_entry_bytes = 4;
  h.header_checksum = Checksum(&h, offsetof(FileHeader, header_checksum));
  report(0.85);

  AtomicFile file(path);
  file.Write(&h, sizeof(h));
  constexpr int64_t kChunk = int64_t{1} << 22;  // tokens per write, for progress
  for (int64_t i = 0; i < n; i += kChunk) {
    file.Write(tokens.data() + i, 4 * static_cast<size_t>(std::min(kChunk, n - i)));
    report(0.85 + 0.07 * static_cast<double>(i) / static_cast<double>(n));
  }
  const uint8_t zeros[kSectionAlign] = {};
  file.Write(zeros, h.sa_offset - (kHeaderBytes + 4 * static_cast<uint64_t>(n)));
  for (int64_t i = 0; i < n; i += kChunk) {
    file.Write(sa.data() + i, 4 * static_cast<size_t>(std::min(kChunk, n - i)));
    report(0.92 + 0.07 * static_cast<double>(i) / static_cast<double>(n));
  }
  report(0.99);
  file.Commit();
  report(1.0);
}

// ------------------------------------------------------------------ Datastore

std::unique_ptr<Datastore> Datastore::Open(const std::string& path, uint64_t expected_fingerprint,
                                           const RetrievalOptions& options) {
  const std::string rebuild = "; rebuild it with `graft index build`";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open index " + path + ": " + std::strerror(errno) +
                " (check the --index path)");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error("cannot stat index " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("index " + path + " is not a regular file (check the --index path)");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    throw Error("index " + path + " is truncated (" + std::to_string(size) +
                " bytes, smaller than the " + std::to_string(kHeaderBytes) + "-byte header)" + rebuild);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED)
    throw Error("cannot map index " + path + ": " + std::strerror(map_errno));
  std::unique_ptr<Datastore> ds(new Datastore());
  ds->path_ = path;
  ds->map_ = static_cast<const uint8_t*>(map);
  ds->map_bytes_ = size;
  ds->options_ = options;

  FileHeader h;
  std::memcpy(&h, ds->map_, sizeof(h));
  if (std::memcmp(h.magic, kMagic, 8) != 0)
    throw Error(path + " is not a Graft index (bad magic; expected \"GRAFTIDX\")");
  if (h.version != kDatastoreVersion)
    throw Error("index " + path + " has format version " + std::to_string(h.version) +
                ", this build reads version " + std::to_string(kDatastoreVersion) + rebuild);
  if (h.header_checksum != Checksum(&h, offsetof(FileHeader, header_checksum)))
    throw Error("index " + path + " has a corrupted header (checksum mismatch)" + rebuild);
  const uint64_t n = h.num_tokens;
  if (h.header_bytes != kHeaderBytes || h.tokens_offset != kHeaderBytes ||
      h.sa_entry_bytes != 4 || h.separator != kDatastoreSeparator || n > static_cast<uint64_t>(kMaxSortBytes) ||
      h.sa_offset != AlignUp(kHeaderBytes + 4 * n, kSectionAlign) ||
      h.file_bytes != h.sa_offset + 4 * n)
    throw Error("index " + path + " has an inconsistent header" + rebuild);
  if (h.file_bytes != size)
    throw Error("index " + path + " is truncated or damaged: " + std::to_string(size) +
                " bytes, the header says " + std::to_string(h.file_bytes) + rebuild);
  if (expected_fingerprint != 0 && h.tokenizer_fingerprint != expected_fingerprint)
    throw Error("index " + path + " was built for a different tokenizer (fingerprint " +
                Hex(h.tokenizer_fingerprint) + ", the model's is " + Hex(expected_fingerprint) +
                "); rebuild it with this model's tokenizer");
  ds->tokens_ = {reinterpret_cast<const Token*>(ds->map_ + h.tokens_offset), n};
  ds->sa_ = {reinterpret_cast<const uint32_t*>(ds->map_ + h.sa_offset), n};
  if (Checksum(ds->tokens_.data(), 4 * n) != h.tokens_checksum)
    throw Error("index " + path + " has a corrupted token section (checksum mismatch)" + rebuild);
  ds->sa_checksum_ = h.sa_checksum;
  ds->stats_ = {static_cast<int64_t>(n), static_cast<int64_t>(h.num_documents),
                static_cast<int64_t>(size), h.version, h.tokenizer_fingerprint};
  return ds;
}

Datastore::~Datastore() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
}

DatastoreStats Datastore::Stats() const { return stats_; }

void Datastore::Verify() const {
  if (Checksum(sa_.data(), sa_.size_bytes()) != sa_checksum_)
    throw Error("index " + path_ + " has a corrupted suffix array (checksum mismatch); "
                "rebuild it with `graft index build`");
  const uint64_t n = tokens_.size();
  for (uint32_t v : sa_)
    if (v >= n) throw Error("index " + path_ + " has a suffix array entry out of range");
}

namespace {
// Compares the suffix at `pos` with `pattern` on the pattern's length: <0, 0 (the
// pattern is a prefix of the suffix) or >0. Out-of-range positions compare smallest.
inline int ComparePrefix(TokenSpan text, uint32_t pos, TokenSpan pattern) {
  const size_t n = text.size();
  if (pos >= n) return -1;
  const size_t m = std::min(pattern.size(), n - pos);
  for (size_t k = 0; k < m; ++k) {
    const Token a = text[pos + k], b = pattern[k];
    if (a != b) return a < b ? -1 : 1;
  }
  return m == pattern.size() ? 0 : -1;
}
}  // namespace

std::pair<int64_t, int64_t> Datastore::FindRange(TokenSpan pattern) const {
  // lower bound: first suffix >= pattern; upper bound: first suffix > pattern (prefix-wise).
  int64_t lo = 0, hi = static_cast<int64_t>(sa_.size());
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (ComparePrefix(tokens_, sa_[mid], pattern) < 0) lo = mid + 1;
    else hi = mid;
  }
  const int64_t first = lo;
  hi = static_cast<int64_t>(sa_.size());
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (ComparePrefix(tokens_, sa_[mid], pattern) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return {first, lo};
}

void Datastore::Query(TokenSpan context, int32_t budget, CandidateTrie* out) const {
  out->clear();
  out->source = Source::kCorpus;
  if (budget <= 0 || tokens_.empty()) return;
  size_t begin = context.size();
  while (begin > 0 && context[begin - 1] >= 0 &&
         context.size() - begin < static_cast<size_t>(std::max(options_.max_match, 0)))
    --begin;
  const TokenSpan tail = context.subspan(begin);
  const int64_t n = static_cast<int64_t>(tokens_.size());
  auto occurs = [&](int32_t len) {
    const TokenSpan p = tail.last(len);
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (ComparePrefix(tokens_, sa_[mid], p) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo < n && ComparePrefix(tokens_, sa_[lo], p) == 0;
  };
  // Longest occurring suffix: occurrence is monotone in the length.
  int32_t good = 0, bad = static_cast<int32_t>(tail.size()) + 1;
  while (bad - good > 1) {
    const int32_t mid = good + (bad - good) / 2;
    if (occurs(mid)) good = mid;
    else bad = mid;
  }
  const int32_t cap = std::max(options_.max_occurrences, 1);
  std::vector<int64_t> starts;
  starts.reserve(cap);
  for (int32_t len = good; len >= std::max(options_.min_match, 1); --len) {
    const auto [lo, hi] = FindRange(tail.last(len));
    const int64_t count = hi - lo;
    starts.clear();
    bool usable = false;
    for (int64_t j = 0; j < std::min<int64_t>(count, cap); ++j) {
      const int64_t i = count <= cap ? lo + j : lo + j * count / cap;
      const int64_t s = static_cast<int64_t>(sa_[i]) + len;
      if (s >= n) continue;  // at the text end (or a corrupted entry): no continuation
      starts.push_back(s);
      usable = usable || tokens_[s] >= 0;
    }
    if (!usable) continue;
    retrieval_internal::ExpandOccurrences(tokens_, starts, len, budget, options_, out);
    return;
  }
}

std::string Datastore::Validate() const {
  const size_t n = tokens_.size();
  std::vector<bool> seen(n, false);
  for (uint32_t v : sa_) {
    if (v >= n) return "suffix array entry out of range";
    if (seen[v]) return "suffix array entry repeated";
    seen[v] = true;
  }
  for (size_t i = 1; i < n; ++i) {
    const TokenSpan a = tokens_.subspan(sa_[i - 1]), b = tokens_.subspan(sa_[i]);
    if (!std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end()))
      return "suffix array not sorted at " + std::to_string(i);
  }
  return "";
}

}  // namespace graft
