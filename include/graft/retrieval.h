// Retrieval sources (docs/design.md §2): given the context so far and a node budget, each
// proposes a small trie of continuations (CandidateTrie) with an estimated probability
// per edge. Pure C++: no llama.h. Implementations:
//   retrieval_suffix.h     SuffixIndex (online suffix automaton), HistoryIndex, RequestRetriever
//   retrieval_pld.h        PromptLookup (n-gram match in the context, a chain)
//   retrieval_datastore.h  Datastore (token suffix array in a memory-mapped file)
//   retrieval_next_token.h NextTokenTable (Token Recycling style top-k successors)
#pragma once

#include <cstdint>
#include <string>

#include "graft/candidates.h"
#include "graft/types.h"

namespace graft {

class RetrievalSource {
 public:
  virtual ~RetrievalSource();

  // Which Source the produced tries are tagged with.
  virtual Source source() const = 0;

  // Clears `out`, then fills it with at most `budget` nodes (parents first) proposing
  // continuations of `context` (the whole token sequence so far, or its tail; sources
  // read only the tail they need). out->source = source(). Const: safe to call from
  // several threads as long as nobody mutates the source meanwhile.
  virtual void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const = 0;

  // How many trailing tokens of the context Query reads, so a caller may hand just
  // those; 0 = all of it. The default covers every count-based source (their matches
  // are at most RetrievalOptions::max_match = 32 tokens long).
  virtual int64_t ContextTokens() const { return 64; }
};

// Shared knobs of the count-based sources (SuffixIndex, Datastore).
//
// Probability model. Let L be the length of the longest suffix of the context (at most
// max_match tokens) that occurs in the indexed text followed by a real token, and S the
// set of its occurrences (at most max_occurrences of them, excluding one that ends at the
// very end of the text). For a trie node w (the continuation tokens after the match),
//   count(w) = occurrences in S followed by w,
//   known(w) = those of count(w) whose text goes on after w (a token or a separator),
// and the edge w -> w.c gets
//   prob = count(w.c) / (known(w) + count_smoothing) * conf(L + |w|),
//   conf(l) = l / (l + confidence_alpha)                 (match-length confidence),
// i.e. the maximum-likelihood next-token frequency, shrunk when the matched context is
// short. Nodes are chosen best-first by path_prob (a max-heap), so the output is the
// `budget` nodes with the highest path_prob (ties: shallower, then lower token).
struct RetrievalOptions {
  int32_t max_match = 32;          // longest context suffix matched, tokens
  int32_t min_match = 1;           // shorter matches yield an empty trie
  int32_t max_depth = 16;          // deepest trie node (continuation length)
  int32_t max_occurrences = 32;    // occurrences of the match used for counts (a sample)
  float confidence_alpha = 1.0f;   // conf(l) = l / (l + alpha)
  float count_smoothing = 0.0f;    // added to known(w) in the denominator
};

// Union of two tries: nodes with the same token path become one node whose edge prob is
// max(prob_a, prob_b) (each source's estimate is a lower bound on the evidence, the max is
// the optimistic combination); path_prob is recomputed as the product along the merged
// path. Keeps the `budget` nodes with the highest path_prob (ties: lower index in the
// union, which lists a's nodes first, then b's new ones) - a set closed under parents
// because prob <= 1 - and writes them parents-first. out->source = a.source. `out` may
// not alias a or b. Cost: O((|a| + |b|) log(|a| + |b|)).
void MergeTries(const CandidateTrie& a, const CandidateTrie& b, int32_t budget,
                CandidateTrie* out);

// Checks the CandidateTrie invariants: equal array sizes, parents first, prob in (0, 1],
// path_prob = parent's path_prob * prob, no two siblings with the same token.
// Returns "" when valid, else the first violation.
std::string ValidateTrie(const CandidateTrie& trie);

}  // namespace graft
