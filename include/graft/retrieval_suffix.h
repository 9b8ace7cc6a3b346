// Request-local and history retrieval (docs/design.md §2): an online suffix automaton over a
// token stream. Pure C++: no llama.h.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "graft/retrieval.h"

namespace graft {

// Suffix automaton (SAM) over one token stream, built online. Each state is a set of
// substrings with the same end positions (endpos). A state's first transition is stored
// inline (most states have one), further ones in one open-addressing hash table keyed by
// (state, token) plus a per-state token list, so a clone can copy its original's
// transitions. The suffix-link tree is kept as child records (one per state, singly
// linked per parent; a clone takes over the record of the state it splits, so no record
// is ever unlinked), so the occurrences of a state - the non-clone states in its subtree,
// one per end position - can be enumerated at query time without per-append count
// propagation.
//
// Costs: Append amortised O(1) (total transitions < 3n); LongestMatch O(max_match)
// expected; Query O(max_match + |S| log |S| + budget log budget) for a sample S of at most
// options.max_occurrences occurrences. Memory is measured in bench/retrieval_bench.cc
// (bytes_per_token).
// Tokens must be >= 0, or kSeparator: a separator is indexed like a token but never
// occurs in a query tail, so no match crosses it, and continuations stop at it.
class SuffixIndex : public RetrievalSource {
 public:
  static constexpr Token kSeparator = -1;
  // Most tokens one index holds. A SAM over n tokens has at most 2n - 1 states, 2n - 1
  // link-tree records and 2n - 4 overflow transitions (< 3n transitions, one inline per
  // state but the last), all indexed by int32: n <= 2^30 keeps each below 2^31 - 1.
  static constexpr int64_t kMaxTokens = int64_t{1} << 30;

  explicit SuffixIndex(const RetrievalOptions& options = {}, Source source = Source::kRequest);

  Source source() const override { return source_; }

  // See RetrievalOptions for the model. Only the last options.max_match tokens of
  // `context` after its last negative token are read.
  void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const override;

  // Appends one token (>= 0 or kSeparator). Amortised O(1); throws std::invalid_argument
  // on other negative tokens and graft::Error when the index already holds kMaxTokens.
  void Append(Token t);
  void Append(TokenSpan tokens);
  // Forgets everything but keeps the allocated memory. O(capacity) for the hash table.
  void Clear();
  // Pre-allocates for n tokens so Append does not reallocate. O(n); throws graft::Error,
  // before allocating, when n_tokens > kMaxTokens.
  void Reserve(int64_t n_tokens);

  int64_t size() const { return static_cast<int64_t>(text_.size()); }
  TokenSpan text() const { return text_; }
  int32_t num_states() const { return static_cast<int32_t>(states_.size()); }
  int64_t num_transitions() const { return transitions_; }
  // Heap bytes held (by capacity), for the memory-per-token figure.
  size_t MemoryBytes() const;

  struct Match {
    int32_t state = 0;   // SAM state holding the matched suffix (0 = none)
    int32_t length = 0;  // matched tokens, 0 = no match
  };
  // The longest suffix of the context tail (<= max_match tokens) that occurs in the text
  // followed by a real token (not a separator, not the text end). O(max_match) expected.
  Match LongestMatch(TokenSpan context) const;

  // Appends to `ends` the end positions (inclusive) of occurrences of `state`'s strings,
  // at most `limit` of them, roughly newest first. O(limit).
  void Occurrences(int32_t state, int32_t limit, std::vector<int64_t>* ends) const;

  // Full structural check (lengths, links, transitions, link tree, occurrence count).
  // Returns "" when valid. O(states + transitions).
  std::string Validate() const;

  const RetrievalOptions& options() const { return options_; }

 private:
  struct State {
    uint32_t len : 31;   // length of the longest string in the state
    uint32_t clone : 1;  // 1 = made by splitting (no end position of its own)
    int32_t link;        // suffix link (longest suffix in another state), -1 for the root
    Token tok0;          // first transition's token, kNoEdge = none
    int32_t to0;         // first transition's target
    int32_t edge_head;   // further transitions: list in edge_token_/edge_next_, targets in the table
    int32_t kid_head;    // this state's child records in kids_ (suffix-link tree), -1 none
    int32_t my_kid;      // the record in kids_ that lists this state under its link
  };
  struct Kid {
    int32_t state;  // a child: its link is the parent whose list holds this record
    int32_t next;   // next record of the same parent, -1 = end
  };
  static constexpr Token kNoEdge = INT32_MIN;

  int32_t NewState(int32_t len, bool clone);
  int32_t Get(int32_t state, Token t) const;          // -1 if absent
  int64_t FindSlot(uint64_t key) const;               // slot holding key or the empty slot
  void AddTransition(int32_t state, Token t, int32_t target);
  void Redirect(int32_t state, Token t, int32_t target);  // existing transition
  bool HasRealTransition(int32_t state) const;        // one on a token >= 0
  void GrowTable();
  void Attach(int32_t parent, int32_t child);         // sets link, adds a child record
  void CollectStarts(int32_t state, int32_t limit, std::vector<int64_t>* starts) const;

  RetrievalOptions options_;
  Source source_;
  std::vector<Token> text_;        // [n] the stream, for continuations
  std::vector<State> states_;      // [states], 0 = root
  std::vector<Kid> kids_;          // [attaches] suffix-link tree child records
  std::vector<Token> edge_token_;  // [overflow transitions] token of each
  std::vector<int32_t> edge_next_; // [overflow transitions] next entry of the same state's list
  std::vector<uint64_t> keys_;     // [capacity] (state << 32 | token), kEmpty = free slot
  std::vector<int32_t> values_;    // [capacity] target state
  int64_t table_count_ = 0;        // occupied slots
  int32_t table_shift_ = 64;       // 64 - log2(capacity)
  int64_t transitions_ = 0;        // inline + table
  int32_t last_ = 0;               // state of the whole text
};

struct HistoryOptions {
  int64_t capacity_tokens = 1 << 20;  // index size bound, separators included; <= SuffixIndex::kMaxTokens
  RetrievalOptions retrieval;
};

// Earlier requests' outputs, bounded and evictable. Each output is followed by a
// separator. When adding an output would exceed capacity, the index is rebuilt from the
// newest outputs that fit in capacity / 2 (an output longer than that keeps its tail),
// so the rebuild cost is amortised O(1) per added token.
class HistoryIndex : public RetrievalSource {
 public:
  // Throws graft::Error when options.capacity_tokens > SuffixIndex::kMaxTokens.
  explicit HistoryIndex(const HistoryOptions& options = {});
  Source source() const override { return Source::kRequest; }
  void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const override {
    index_.Query(context, budget, out);
  }
  void AddOutput(TokenSpan output);
  void Clear();
  int64_t size() const { return index_.size(); }
  int32_t num_outputs() const { return static_cast<int32_t>(outputs_.size()); }
  size_t MemoryBytes() const;
  const SuffixIndex& index() const { return index_; }
  std::string Validate() const;

 private:
  HistoryOptions options_;
  std::deque<std::vector<Token>> outputs_;  // outputs in index_, oldest first (to rebuild)
  SuffixIndex index_;
};

// The request-local source: prompt + accepted tokens in a SuffixIndex, optionally merged
// with a shared HistoryIndex (not owned; may be null; must outlive this object).
class RequestRetriever : public RetrievalSource {
 public:
  explicit RequestRetriever(const RetrievalOptions& options = {},
                            const HistoryIndex* history = nullptr);
  Source source() const override { return Source::kRequest; }
  // Request trie merged (MergeTries) with the history trie when the history is non-empty.
  void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const override;
  // Starts a new request. O(|prompt|) amortised.
  void Reset(TokenSpan prompt);
  // Appends accepted tokens. Amortised O(1) per token.
  void Append(TokenSpan accepted) { index_.Append(accepted); }
  void Append(Token t) { index_.Append(t); }
  const SuffixIndex& index() const { return index_; }

 private:
  SuffixIndex index_;
  const HistoryIndex* history_;
};

}  // namespace graft
