#include <algorithm>

#include "graft/retrieval_pld.h"

namespace graft {

void PromptLookup::Query(TokenSpan context, int32_t budget, CandidateTrie* out) const {
  out->clear();
  out->source = Source::kPld;
  const int64_t size = static_cast<int64_t>(context.size());
  if (budget <= 0 || size < 2) return;
  const int64_t lo = options_.max_scan > 0 ? std::max<int64_t>(0, size - options_.max_scan) : 0;
  for (int32_t n = std::min<int64_t>(options_.max_ngram, size - 1); n >= std::max(options_.min_ngram, 1);
       --n) {
    const Token* pattern = context.data() + size - n;
    // Occurrence [i, i + n) with i + n <= size - 1 (a following token), newest first.
    for (int64_t i = size - n - 1; i >= lo; --i) {
      if (context[i] != pattern[0] || !std::equal(pattern, pattern + n, context.data() + i))
        continue;
      const float prob = static_cast<float>(n) / (static_cast<float>(n) + options_.confidence_alpha);
      int32_t parent = -1;
      for (int64_t j = i + n; j < size && out->size() < budget; ++j) {
        if (context[j] < 0) break;
        parent = out->Add(parent, context[j], prob);
      }
      if (!out->empty()) return;
    }
  }
}

}  // namespace graft
