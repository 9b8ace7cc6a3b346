// MergeTries, and every count-based source (SuffixIndex, HistoryIndex, Datastore)
// against the brute-force oracle on random streams over 2-4 symbols and on real text.
#include "graft/retrieval.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "graft/retrieval_datastore.h"
#include "graft/retrieval_suffix.h"
#include "retrieval/test_oracle.h"

namespace graft {
namespace {

using testing_oracle::CountTrie;
using testing_oracle::ExpectTopOfOracle;
using testing_oracle::Path;
using testing_oracle::PathOf;

// ---------------------------------------------------------------- MergeTries

CandidateTrie RandomTrie(std::mt19937& rng, int n, int alphabet, Source s) {
  CandidateTrie t;
  t.source = s;
  std::uniform_real_distribution<float> prob(0.05f, 1.0f);
  for (int i = 0; i < n; ++i) {
    const int32_t parent = static_cast<int32_t>(rng() % (t.size() + 1)) - 1;
    const Token tok = static_cast<Token>(rng() % alphabet);
    bool dup = false;
    for (int32_t j = 0; j < t.size(); ++j) dup = dup || (t.parent[j] == parent && t.token[j] == tok);
    if (!dup) t.Add(parent, tok, prob(rng));
  }
  return t;
}

TEST(MergeTries, MatchesUnionOracle) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    const int alphabet = 2 + iter % 3;
    const CandidateTrie a = RandomTrie(rng, rng() % 20, alphabet, Source::kRequest);
    const CandidateTrie b = RandomTrie(rng, rng() % 20, alphabet, Source::kCorpus);
    const int32_t budget = static_cast<int32_t>(rng() % 30);
    CandidateTrie out;
    MergeTries(a, b, budget, &out);
    // Oracle: path -> max prob, then path_prob along the path.
    std::map<Path, float> prob;
    for (const CandidateTrie* t : {&a, &b})
      for (int32_t i = 0; i < t->size(); ++i) {
        float& p = prob[PathOf(*t, i)];
        p = std::max(p, t->prob[i]);
      }
    std::map<Path, testing_oracle::OracleNode> oracle;
    for (const auto& [path, p] : prob) {
      float pp = 1.0f;
      for (size_t k = 1; k <= path.size(); ++k) pp *= prob[Path(path.begin(), path.begin() + k)];
      oracle[path] = {p, pp};
    }
    ExpectTopOfOracle(out, oracle, budget, "merge iter " + std::to_string(iter));
    EXPECT_EQ(out.source, Source::kRequest);
  }
}

TEST(MergeTries, EmptyAndIdentity) {
  CandidateTrie a, empty, out;
  a.Add(a.Add(-1, 5, 0.5f), 6, 0.5f);
  MergeTries(a, empty, 10, &out);
  EXPECT_EQ(out.token, a.token);
  MergeTries(empty, a, 10, &out);
  EXPECT_EQ(out.token, a.token);
  MergeTries(a, a, 1, &out);
  ASSERT_EQ(out.size(), 1);
  EXPECT_EQ(out.token[0], 5);
  MergeTries(a, a, 0, &out);
  EXPECT_TRUE(out.empty());
}

// ------------------------------------------- count-based sources vs the oracle

// Each fixture type builds a source from documents; the oracle text is every document
// followed by a separator.
struct SuffixMaker {
  static constexpr const char* kName = "SuffixIndex";
  std::unique_ptr<RetrievalSource> Make(const std::vector<std::vector<Token>>& docs,
                                        const RetrievalOptions& o) {
    auto s = std::make_unique<SuffixIndex>(o);
    for (const auto& d : docs) {
      s->Append(d);
      s->Append(SuffixIndex::kSeparator);
    }
    EXPECT_EQ(s->Validate(), "");
    return s;
  }
};
struct HistoryMaker {
  static constexpr const char* kName = "HistoryIndex";
  std::unique_ptr<RetrievalSource> Make(const std::vector<std::vector<Token>>& docs,
                                        const RetrievalOptions& o) {
    HistoryOptions ho;
    ho.retrieval = o;
    ho.capacity_tokens = 1 << 20;
    auto h = std::make_unique<HistoryIndex>(ho);
    for (const auto& d : docs) h->AddOutput(d);
    EXPECT_EQ(h->Validate(), "");
    return h;
  }
};
struct DatastoreMaker {
  static constexpr const char* kName = "Datastore";
  std::string path = ::testing::TempDir() + "retrieval_test_" + std::to_string(::getpid()) + ".idx";
  ~DatastoreMaker() { std::remove(path.c_str()); }
  std::unique_ptr<RetrievalSource> Make(const std::vector<std::vector<Token>>& docs,
                                        const RetrievalOptions& o) {
    std::vector<Token> all;
    for (const auto& d : docs) {
      all.insert(all.end(), d.begin(), d.end());
      all.push_back(kDatastoreSeparator);
    }
    BuildDatastore(all, 42, path);
    auto ds = Datastore::Open(path, 42, o);
    EXPECT_EQ(ds->Validate(), "");
    return ds;
  }
};

template <typename Maker>
class CountSourceTest : public ::testing::Test {};
using Makers = ::testing::Types<SuffixMaker, HistoryMaker, DatastoreMaker>;
TYPED_TEST_SUITE(CountSourceTest, Makers);

TYPED_TEST(CountSourceTest, MatchesOracleOnTinyAlphabets) {
  std::mt19937 rng(1234);
  TypeParam maker;
  const int builds = std::is_same_v<TypeParam, DatastoreMaker> ? 120 : 300;
  for (int b = 0; b < builds; ++b) {
    const int alphabet = 2 + b % 3;
    std::vector<std::vector<Token>> docs(1 + rng() % 3);
    std::vector<Token> text;
    for (auto& d : docs) {
      d.resize(rng() % 60);
      for (Token& t : d) t = static_cast<Token>(rng() % alphabet);
      text.insert(text.end(), d.begin(), d.end());
      text.push_back(-1);
    }
    RetrievalOptions o;
    o.max_match = 1 + static_cast<int32_t>(rng() % 8);
    o.min_match = 1 + static_cast<int32_t>(rng() % 2);
    o.max_depth = 1 + static_cast<int32_t>(rng() % 6);
    o.max_occurrences = 1 << 20;  // exact counts
    o.confidence_alpha = (rng() % 2) ? 1.0f : 2.5f;
    o.count_smoothing = (rng() % 2) ? 0.0f : 0.5f;
    auto source = maker.Make(docs, o);
    for (int q = 0; q < 10; ++q) {
      std::vector<Token> context;
      if (q % 2 == 0 && !text.empty()) {  // a piece of the text, maybe extended
        const size_t end = 1 + rng() % text.size();
        context.assign(text.begin() + (end - std::min<size_t>(end, rng() % 12)), text.begin() + end);
        for (int k = rng() % 3; k > 0; --k) context.push_back(rng() % alphabet);
      } else {
        context.resize(rng() % 12);
        for (Token& t : context) t = static_cast<Token>(rng() % alphabet);
      }
      const int32_t budget = static_cast<int32_t>(rng() % 40);
      CandidateTrie got;
      source->Query(context, budget, &got);
      ExpectTopOfOracle(got, CountTrie(text, context, o), budget,
                        std::string(TypeParam::kName) + " build " + std::to_string(b) + " q " +
                            std::to_string(q));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TYPED_TEST(CountSourceTest, MatchesOracleOnRealText) {
  // Code-editing tasks (tests/data, 40 lines, ~48 KB): real text with many repeats.
  const std::vector<Token> bytes = testing_oracle::DataFileTokens("code_edit/edit_eval.jsonl", 45000);
  ASSERT_EQ(bytes.size(), 45000u) << "tests/data/code_edit/edit_eval.jsonl missing or short";
  // Three "documents" so separators are exercised.
  std::vector<std::vector<Token>> docs = {
      {bytes.begin(), bytes.begin() + 15000},
      {bytes.begin() + 15000, bytes.begin() + 30000},
      {bytes.begin() + 30000, bytes.end()}};
  std::vector<Token> text;
  for (const auto& d : docs) {
    text.insert(text.end(), d.begin(), d.end());
    text.push_back(-1);
  }
  RetrievalOptions o;
  o.max_match = 12;
  o.max_depth = 6;
  o.max_occurrences = 1 << 20;
  TypeParam maker;
  auto source = maker.Make(docs, o);
  std::mt19937 rng(99);
  for (int q = 0; q < 25; ++q) {
    const size_t end = 1 + rng() % bytes.size();
    const std::vector<Token> context(bytes.begin() + (end - std::min<size_t>(end, 40)),
                                     bytes.begin() + end);
    CandidateTrie got;
    source->Query(context, 24, &got);
    ExpectTopOfOracle(got, CountTrie(text, context, o), 24, "real text q " + std::to_string(q));
  }
}

TYPED_TEST(CountSourceTest, SampledOccurrencesStayValid) {
  // With a small occurrence cap the counts are a sample: every node must still be a real
  // continuation (a path of the exact trie) and the trie valid.
  std::mt19937 rng(5);
  TypeParam maker;
  for (int b = 0; b < 20; ++b) {
    std::vector<std::vector<Token>> docs(2);
    std::vector<Token> text;
    for (auto& d : docs) {
      d.resize(200 + rng() % 200);
      for (Token& t : d) t = static_cast<Token>(rng() % 2);
      text.insert(text.end(), d.begin(), d.end());
      text.push_back(-1);
    }
    RetrievalOptions o;
    o.max_match = 3;
    o.max_depth = 5;
    o.max_occurrences = 4;
    auto source = maker.Make(docs, o);
    RetrievalOptions exact = o;
    exact.max_occurrences = 1 << 20;
    for (int q = 0; q < 10; ++q) {
      std::vector<Token> context(1 + rng() % 6);
      for (Token& t : context) t = static_cast<Token>(rng() % 2);
      CandidateTrie got;
      source->Query(context, 16, &got);
      ASSERT_EQ(ValidateTrie(got), "");
      const auto oracle = CountTrie(text, context, exact);
      for (int32_t i = 0; i < got.size(); ++i)
        ASSERT_TRUE(oracle.count(PathOf(got, i))) << "node " << i << " is not a continuation";
    }
  }
}

}  // namespace
}  // namespace graft
