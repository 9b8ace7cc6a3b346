#include "graft/retrieval_datastore.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "graft/error.h"
#include "retrieval/test_oracle.h"

namespace graft {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "graft_ds_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void WriteAll(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs Open and returns the error message ("" if it opened).
std::string OpenError(const std::string& path, uint64_t fingerprint = 0) {
  try {
    auto ds = Datastore::Open(path, fingerprint);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

class DatastoreFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath("file.idx");
    std::mt19937 rng(1);
    for (int i = 0; i < 5000; ++i) tokens_.push_back(i % 97 == 96 ? -1 : static_cast<Token>(rng() % 50));
    BuildDatastore(tokens_, 0xABCDEF, path_);
    good_ = ReadAll(path_);
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
  std::vector<Token> tokens_;
  std::vector<char> good_;
};

TEST(Xxh64, KnownVectors) {
  EXPECT_EQ(XXH64("", 0, 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(XXH64("abc", 3, 0), 0x44BC2CF5AD770999ull);
  const char* s = "Nobody inspects the spammish repetition";
  EXPECT_EQ(XXH64(s, std::strlen(s), 0), 0xFBCEA83C8A378BF1ull);
}

TEST(Xxh64, SameAsTheReplacedImplementation) {
  // 79 bytes = two 32-byte stripes + an 8-, a 4- and a 3-byte tail: every code path.
  // Values computed with the hand-written XXH64 (src/retrieval/xxhash64.cc) that
  // libxxhash replaced; equal values keep every existing index file valid.
  const char* s = "Graft golden XXH64 vector: the quick brown fox jumps over the lazy dog 01234567";
  ASSERT_EQ(std::strlen(s), 79u);
  EXPECT_EQ(XXH64(s, 79, 0), 0x563E0DDFE4F7E21Aull);
  EXPECT_EQ(XXH64(s, 79, 0x9E3779B97F4A7C15ull), 0x784B2E385EAE0B08ull);
}

// tests/data/golden_v1.idx was written by the code before libxxhash (see
// tests/data/README.md); it must open, verify, and be rebuilt byte for byte.
TEST(Datastore, GoldenIndexFromTheOldCodeStaysValid) {
  const std::string golden = testing_oracle::TestDataPath("golden_v1.idx");
  std::vector<Token> tokens;
  uint32_t x = 12345;
  for (int i = 0; i < 400; ++i) {
    x = x * 1103515245u + 12345u;
    tokens.push_back(i % 50 == 49 ? kDatastoreSeparator : static_cast<Token>((x >> 16) % 40));
  }
  constexpr uint64_t kFingerprint = 0x6772616674763031ull;  // "graftv01"
  auto ds = Datastore::Open(golden, kFingerprint);
  EXPECT_NO_THROW(ds->Verify());
  EXPECT_EQ(ds->Validate(), "");
  EXPECT_EQ(ds->Stats().version, 1u);
  EXPECT_EQ(ds->Stats().tokens, 400);
  EXPECT_EQ(ds->Stats().documents, 8);
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), ds->tokens().begin(), ds->tokens().end()));
  const std::vector<char> bytes = ReadAll(golden);
  ASSERT_EQ(bytes.size(), 3328u);
  uint64_t header_checksum;
  std::memcpy(&header_checksum, bytes.data() + 120, 8);
  EXPECT_EQ(header_checksum, 0xA3D5A89E6C789D65ull);
  const std::string rebuilt = TempPath("golden.idx");
  BuildDatastore(tokens, kFingerprint, rebuilt);
  EXPECT_EQ(ReadAll(rebuilt), bytes);
  std::remove(rebuilt.c_str());
}

TEST(Datastore, TokenLimitFollowsTheCodeWidth) {
  // libdivsufsort's 32-bit interface: width * n <= 2^31 - 2. Checked without building.
  EXPECT_EQ(DatastoreMaxTokens(0), (int64_t{1} << 31) - 2);
  EXPECT_EQ(DatastoreMaxTokens(255), (int64_t{1} << 31) - 2);
  EXPECT_EQ(DatastoreMaxTokens(256), (int64_t{1} << 30) - 1);
  EXPECT_EQ(DatastoreMaxTokens(65535), (int64_t{1} << 30) - 1);
  EXPECT_EQ(DatastoreMaxTokens(65536), 715827882);
  EXPECT_EQ(DatastoreMaxTokens(kDatastoreMaxToken + 1), 715827882);
}

TEST_F(DatastoreFile, OpensAndReportsStats) {
  auto ds = Datastore::Open(path_, 0xABCDEF);
  const DatastoreStats st = ds->Stats();
  EXPECT_EQ(st.tokens, 5000);
  EXPECT_EQ(st.documents, 5000 / 97 + 1);
  EXPECT_EQ(st.file_bytes, static_cast<int64_t>(good_.size()));
  EXPECT_EQ(st.version, kDatastoreVersion);
  EXPECT_EQ(st.tokenizer_fingerprint, 0xABCDEFu);
  EXPECT_NO_THROW(ds->Verify());
  EXPECT_EQ(ds->Validate(), "");
  EXPECT_EQ(std::string(good_.data(), 8), "GRAFTIDX");
}

TEST_F(DatastoreFile, MissingFile) {
  EXPECT_NE(OpenError(path_ + ".nope").find("cannot open index"), std::string::npos);
  EXPECT_NE(OpenError(::testing::TempDir()).find("not a regular file"), std::string::npos);
}

TEST_F(DatastoreFile, Truncated) {
  for (size_t keep : {size_t{0}, size_t{100}, size_t{128}, good_.size() / 2, good_.size() - 1}) {
    WriteAll(path_, std::vector<char>(good_.begin(), good_.begin() + keep));
    EXPECT_NE(OpenError(path_).find("truncated"), std::string::npos) << keep << ": " << OpenError(path_);
  }
}

TEST_F(DatastoreFile, WrongMagic) {
  auto bad = good_;
  bad[0] = 'X';
  WriteAll(path_, bad);
  EXPECT_NE(OpenError(path_).find("not a Graft index"), std::string::npos);
}

TEST_F(DatastoreFile, WrongVersion) {
  auto bad = good_;
  bad[8] = 2;
  WriteAll(path_, bad);
  EXPECT_NE(OpenError(path_).find("version 2"), std::string::npos) << OpenError(path_);
}

TEST_F(DatastoreFile, FlippedBytes) {
  auto bad = good_;
  bad[120] ^= 1;  // header checksum
  WriteAll(path_, bad);
  EXPECT_NE(OpenError(path_).find("corrupted header"), std::string::npos);
  bad = good_;
  bad[30] ^= 1;  // num_tokens
  WriteAll(path_, bad);
  EXPECT_NE(OpenError(path_).find("corrupted header"), std::string::npos);
  bad = good_;
  bad[128 + 400] ^= 1;  // a token
  WriteAll(path_, bad);
  EXPECT_NE(OpenError(path_).find("corrupted token section"), std::string::npos);
  // The suffix array is checked by Verify(); queries on a damaged one must not crash.
  bad = good_;
  for (size_t i = bad.size() - 4 * 3000; i < bad.size(); i += 7) bad[i] = static_cast<char>(0xFF);
  WriteAll(path_, bad);
  auto ds = Datastore::Open(path_);
  EXPECT_THROW(ds->Verify(), Error);
  CandidateTrie out;
  for (int q = 0; q < 200; ++q) {
    const std::vector<Token> ctx(tokens_.begin() + q * 20, tokens_.begin() + q * 20 + 10);
    ds->Query(ctx, 16, &out);
    EXPECT_EQ(ValidateTrie(out), "");
  }
}

TEST_F(DatastoreFile, FingerprintMismatch) {
  EXPECT_EQ(OpenError(path_, 0xABCDEF), "");
  EXPECT_EQ(OpenError(path_, 0), "");
  const std::string msg = OpenError(path_, 0x1234);
  EXPECT_NE(msg.find("different tokenizer"), std::string::npos);
  EXPECT_NE(msg.find("0000000000abcdef"), std::string::npos) << msg;
}

int CountTmpFiles(const std::string& dir, const std::string& prefix) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name).rfind(prefix + ".tmp.", 0) == 0) ++n;
  ::closedir(d);
  return n;
}

TEST_F(DatastoreFile, AtomicWrite) {
  // Unwritable destination: nothing created, a clear error.
  const std::string no_dir = TempPath("no_such_dir") + "/x.idx";
  try {
    BuildDatastore(tokens_, 1, no_dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos);
  }
  EXPECT_NE(::access(no_dir.c_str(), F_OK), 0);
  // A build that fails half way through writing (here: progress throws) leaves the old
  // index untouched and no temporary file.
  const std::string dir = ::testing::TempDir();
  const std::string name = path_.substr(dir.size());
  EXPECT_THROW(BuildDatastore(std::vector<Token>(20000, 3), 2, path_,
                              [](double f) { if (f > 0.9) throw std::runtime_error("killed"); }),
               std::runtime_error);
  EXPECT_EQ(ReadAll(path_), good_);
  EXPECT_EQ(CountTmpFiles(dir, name), 0);
  // Fresh path: a failed build leaves nothing at all.
  const std::string fresh = TempPath("fresh.idx");
  EXPECT_THROW(BuildDatastore(tokens_, 2, fresh, [](double f) { if (f > 0.9) throw 1; }), int);
  EXPECT_NE(::access(fresh.c_str(), F_OK), 0);
  // A stale temporary file from a killed build does not confuse the loader.
  WriteAll(path_ + ".tmp.999999", std::vector<char>(good_.begin(), good_.begin() + 77));
  EXPECT_EQ(OpenError(path_), "");
  std::remove((path_ + ".tmp.999999").c_str());
}

TEST(Datastore, RejectsBadTokens) {
  const std::string path = TempPath("bad.idx");
  EXPECT_THROW(BuildDatastore(std::vector<Token>{1, -2, 3}, 0, path), std::invalid_argument);
  EXPECT_THROW(BuildDatastore(std::vector<Token>{1 << 24}, 0, path), std::invalid_argument);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(Datastore, EmptyCorpus) {
  const std::string path = TempPath("empty.idx");
  BuildDatastore({}, 5, path);
  auto ds = Datastore::Open(path, 5);
  EXPECT_EQ(ds->Stats().tokens, 0);
  EXPECT_EQ(ds->Stats().documents, 0);
  CandidateTrie out;
  ds->Query(std::vector<Token>{1, 2}, 8, &out);
  EXPECT_TRUE(out.empty());
  ds->Verify();
  std::remove(path.c_str());
}

TEST(Datastore, WideAlphabetsSortCorrectly) {
  // 1-, 2- and 3-byte codes: the suffix array must be sorted by token value.
  const std::string path = TempPath("wide.idx");
  std::mt19937 rng(4);
  for (int range : {200, 5000, 200000}) {
    std::vector<Token> tokens(100000);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = (i % 1000 == 999) ? -1 : static_cast<Token>(rng() % 3 == 0 ? rng() % range : rng() % 4);
    if (range == 200000) tokens[5] = kDatastoreMaxToken;
    BuildDatastore(tokens, 9, path);
    auto ds = Datastore::Open(path, 9);
    ASSERT_EQ(ds->Validate(), "") << range;
    ds->Verify();
    const std::vector<Token> pattern(tokens.begin() + 500, tokens.begin() + 503);
    const auto [lo, hi] = ds->FindRange(pattern);
    int64_t want = 0;
    for (size_t i = 0; i + 3 <= tokens.size(); ++i)
      want += std::equal(pattern.begin(), pattern.end(), tokens.begin() + i);
    EXPECT_EQ(hi - lo, want);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace graft
