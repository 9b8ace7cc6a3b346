// Test helpers for the tree module: random valid trees and candidate tries.
#pragma once

#include <random>
#include <set>
#include <utility>

#include "graft/candidates.h"
#include "graft/tree.h"

namespace graft::testing {

inline Source RandomSource(std::mt19937_64& rng) {
  static constexpr Source kSources[] = {Source::kDraft, Source::kRequest, Source::kCorpus,
                                        Source::kRecycle, Source::kPld};
  return kSources[rng() % 5];
}

inline float RandomProb(std::mt19937_64& rng) {
  return std::uniform_real_distribution<float>(0.01f, 1.0f)(rng);
}

// A valid tree of up to `n` nodes (no duplicate siblings) over tokens [0, vocab).
inline TokenTree RandomTree(std::mt19937_64& rng, int n, int vocab) {
  TokenTree t;
  t.Reset(static_cast<Token>(rng() % vocab));
  std::set<std::pair<int32_t, Token>> used;
  for (int tries = 0; t.size() < n && tries < 8 * n; ++tries) {
    const int32_t p = static_cast<int32_t>(rng() % t.size());
    const Token tok = static_cast<Token>(rng() % vocab);
    if (!used.insert({p, tok}).second) continue;
    t.Add(p, tok, RandomProb(rng), RandomSource(rng));
  }
  return t;
}

// A random trie of up to `n` nodes; siblings may repeat tokens (tries from several
// sources merged carelessly), which Graft must merge.
inline CandidateTrie RandomTrie(std::mt19937_64& rng, int n, int vocab) {
  CandidateTrie c;
  for (int i = 0; i < n; ++i) {
    const int32_t p = static_cast<int32_t>(rng() % (c.size() + 1)) - 1;
    c.Add(p, static_cast<Token>(rng() % vocab), RandomProb(rng));
  }
  return c;
}

}  // namespace graft::testing
