// Prompt lookup (PLD): n-gram match of the context tail in the context itself, proposing
// the tokens that followed the match as a chain (what llama.cpp's prompt lookup does).
// Pure C++: no llama.h.
#pragma once

#include <cstdint>

#include "graft/retrieval.h"

namespace graft {

struct PromptLookupOptions {
  int32_t max_ngram = 3;          // tried first
  int32_t min_ngram = 1;          // tried last
  int64_t max_scan = 0;           // search only the last max_scan tokens; 0 = whole context
  float confidence_alpha = 1.0f;  // every edge gets prob = n / (n + alpha)
};

// For n = max_ngram down to min_ngram: the most recent earlier occurrence of the last n
// context tokens that is followed by at least one token; the answer is the chain of (at
// most `budget`) tokens following it, up to the context end. No counts: each edge gets
// prob = n / (n + alpha), so path_prob decays geometrically with depth.
// Cost: O(max_scan * n) per n tried, worst case (no match); stateless.
class PromptLookup : public RetrievalSource {
 public:
  explicit PromptLookup(const PromptLookupOptions& options = {}) : options_(options) {}
  Source source() const override { return Source::kPld; }
  void Query(TokenSpan context, int32_t budget, CandidateTrie* out) const override;
  // The whole context by default: a match may lie anywhere in a long prompt.
  int64_t ContextTokens() const override { return options_.max_scan; }
  const PromptLookupOptions& options() const { return options_; }

 private:
  PromptLookupOptions options_;
};

}  // namespace graft
