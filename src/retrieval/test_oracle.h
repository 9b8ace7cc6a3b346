// Test-only brute-force references for the retrieval sources. Slow and obvious.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graft/candidates.h"
#include "graft/retrieval.h"

namespace graft::testing_oracle {

using Path = std::vector<Token>;

struct OracleNode {
  float prob = 0;
  float path_prob = 0;
};

// The full continuation trie the RetrievalOptions model defines (all occurrences), as
// path -> node, depth <= max_depth. O(n * max_match + nodes * n).
inline std::map<Path, OracleNode> CountTrie(const std::vector<Token>& text, TokenSpan context,
                                            const RetrievalOptions& o) {
  std::map<Path, OracleNode> trie;
  const int64_t n = static_cast<int64_t>(text.size());
  size_t begin = context.size();
  while (begin > 0 && context[begin - 1] >= 0 && context.size() - begin < (size_t)o.max_match) --begin;
  const std::vector<Token> tail(context.begin() + begin, context.end());
  for (int32_t len = static_cast<int32_t>(tail.size()); len >= std::max(o.min_match, 1); --len) {
    std::vector<int64_t> occ;  // start of the continuation
    bool usable = false;
    for (int64_t e = len - 1; e < n; ++e) {
      if (!std::equal(tail.end() - len, tail.end(), text.begin() + (e - len + 1))) continue;
      if (e + 1 >= n) continue;
      occ.push_back(e + 1);
      usable = usable || text[e + 1] >= 0;
    }
    if (!usable) continue;
    std::function<void(const Path&, const std::vector<int64_t>&, float)> expand =
        [&](const Path& w, const std::vector<int64_t>& pos, float path_prob) {
          if (static_cast<int32_t>(w.size()) >= o.max_depth) return;
          int known = 0;
          std::map<Token, std::vector<int64_t>> groups;
          for (int64_t p : pos) {
            if (p >= n) continue;
            ++known;
            if (text[p] >= 0) groups[text[p]].push_back(p + 1);
          }
          const int64_t l = len + static_cast<int64_t>(w.size());
          const float conf = static_cast<float>(l) / (static_cast<float>(l) + o.confidence_alpha);
          for (auto& [t, g] : groups) {
            const float prob =
                std::min(1.0f, static_cast<float>(g.size()) / (known + o.count_smoothing) * conf);
            Path child = w;
            child.push_back(t);
            trie[child] = {prob, path_prob * prob};
            expand(child, g, path_prob * prob);
          }
        };
    expand({}, occ, 1.0f);
    return trie;
  }
  return trie;
}

inline Path PathOf(const CandidateTrie& t, int32_t i) {
  Path p;
  for (; i >= 0; i = t.parent[i]) p.push_back(t.token[i]);
  std::reverse(p.begin(), p.end());
  return p;
}

inline bool Near(float a, float b) { return std::abs(a - b) <= 2e-5f * std::max(1.0f, std::abs(b)); }

// `got` must be valid, of size min(budget, |oracle|), every node in the oracle with the
// same prob, and its path_probs the top ones of the oracle's.
inline void ExpectTopOfOracle(const CandidateTrie& got, const std::map<Path, OracleNode>& oracle,
                              int32_t budget, const std::string& what) {
  ASSERT_EQ(ValidateTrie(got), "") << what;
  ASSERT_EQ(got.size(), std::min<int64_t>(budget, oracle.size())) << what;
  std::vector<float> got_pp, want_pp;
  for (int32_t i = 0; i < got.size(); ++i) {
    auto it = oracle.find(PathOf(got, i));
    ASSERT_NE(it, oracle.end()) << what << " node " << i << " not in oracle";
    EXPECT_TRUE(Near(got.prob[i], it->second.prob)) << what << " node " << i << " prob "
                                                    << got.prob[i] << " vs " << it->second.prob;
    got_pp.push_back(got.path_prob[i]);
  }
  for (const auto& [p, node] : oracle) want_pp.push_back(node.path_prob);
  std::sort(got_pp.rbegin(), got_pp.rend());
  std::sort(want_pp.rbegin(), want_pp.rend());
  for (size_t i = 0; i < got_pp.size(); ++i)
    ASSERT_TRUE(Near(got_pp[i], want_pp[i])) << what << " rank " << i << ": " << got_pp[i]
                                             << " vs " << want_pp[i];
}

// Path of a fixture under tests/data: $GRAFT_SOURCE_DIR/tests/data (ctest sets it), else
// the GRAFT_TEST_DATA_DIR this test was compiled with. A missing file is a test failure
// (the fixtures are part of the repository), never a skip.
inline std::string TestDataPath(const std::string& relative) {
  std::string dir;
  if (const char* src = std::getenv("GRAFT_SOURCE_DIR"); src != nullptr && *src != '\0') {
    dir = std::string(src) + "/tests/data/";
  } else {
#ifdef GRAFT_TEST_DATA_DIR
    dir = GRAFT_TEST_DATA_DIR "/";
#endif
  }
  const std::string path = dir + relative;
  if (dir.empty() || !std::ifstream(path, std::ios::binary)) {
    ADD_FAILURE() << "test fixture " << (dir.empty() ? "tests/data/" + relative : path)
                  << " not found (set GRAFT_SOURCE_DIR to the source tree)";
  }
  return path;
}

// The first `max_bytes` bytes of a fixture under tests/data as tokens (byte value + 0).
// Empty, with a test failure recorded, when the fixture is missing.
inline std::vector<Token> DataFileTokens(const std::string& relative, size_t max_bytes) {
  std::ifstream in(TestDataPath(relative), std::ios::binary);
  std::vector<Token> out;
  char c;
  while (out.size() < max_bytes && in.get(c)) out.push_back(static_cast<unsigned char>(c));
  return out;
}

}  // namespace graft::testing_oracle
