// Next-token table (Token Recycling style, docs/design.md §2): for each token id, the top-k
// next tokens the target proposed at verified positions, updated online. Pure C++.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graft/retrieval.h"

namespace graft {

struct NextTokenOptions {
  int32_t k = 8;           // successors kept per token
  int32_t max_depth = 8;   // deepest trie node
  // On Update, scores of kept successors not in the new top-k are multiplied by decay
  // and compete with the new ones for the k slots. 0 = replace the row (Token Recycling).
  float decay = 0.0f;
};

// Rows are allocated lazily: a token never seen as `prev` costs 4 bytes (its row index),
// a used row k * 8 bytes + 1.
class NextTokenTable : public RetrievalSource {
 public:
  explicit NextTokenTable(int32_t vocab_size, const NextTokenOptions& options = {});
  Source source() const override { return Source::kRecycle; }

  // Best-first expansion from the last context token: children of a node with token t are
  // t's stored successors, edge prob = stored score clamped to (0, 1]. Yields the `budget`
  // nodes with the highest path_prob (ties: shallower, then earlier). Sibling tokens are
  // distinct; a token may recur on different paths. O(budget * (k + log budget)).
  void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const override;

  // Records the target's top-k after `prev` (tokens with their probabilities, any order,
  // equal lengths). Tokens out of [0, vocab), duplicates (the first wins) and
  // non-positive or NaN probabilities are skipped; prev out of range is ignored.
  // O(k log k).
  void Update(Token prev, std::span<const Token> topk_next, std::span<const float> probs);

  // Successors of `prev` by descending score; empty if none. Valid until the next Update.
  std::span<const Token> Next(Token prev) const;
  std::span<const float> Scores(Token prev) const;

  void Clear();
  int32_t vocab_size() const { return static_cast<int32_t>(row_of_.size()); }
  int32_t rows() const { return static_cast<int32_t>(row_size_.size()); }
  size_t MemoryBytes() const;
  // Rows consistent, scores sorted descending in (0, inf), tokens distinct and in range.
  std::string Validate() const;

 private:
  NextTokenOptions options_;
  std::vector<int32_t> row_of_;   // [vocab] row index, -1 = no row yet
  std::vector<Token> next_;       // [rows * k] successors, best first
  std::vector<float> score_;      // [rows * k]
  std::vector<uint8_t> row_size_; // [rows] used entries of each row (<= k)
};

}  // namespace graft
