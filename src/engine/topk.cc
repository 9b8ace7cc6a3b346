#include "engine/topk.h"

#include <algorithm>
#include <cmath>

#include "verify/logit_scan.h"

namespace graft {

void TopKSoftmax(const float* logits, int32_t n_vocab, int32_t k, std::vector<std::pair<float, Token>>* out) {
  out->clear();
  // A min-heap (by this order) of the k best logits.
  auto better = [](const std::pair<float, Token>& a, const std::pair<float, Token>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  int32_t i = 0;
  for (; i < n_vocab && static_cast<int32_t>(out->size()) < k; ++i) {
    out->push_back({logits[i], i});
    std::push_heap(out->begin(), out->end(), better);
  }
  // Then only logits above the heap's worst can enter: skip to them a block at a time.
  while (k > 0 && (i = FirstAbove(logits, i, n_vocab, out->front().first)) < n_vocab) {
    std::pop_heap(out->begin(), out->end(), better);
    out->back() = {logits[i], i};
    std::push_heap(out->begin(), out->end(), better);
    ++i;
  }
  std::sort_heap(out->begin(), out->end(), better);  // best first
  if (out->empty()) return;
  const float mx = out->front().first;
  const float sum = SumExpAbove(logits, n_vocab, mx, mx - 20.0f);
  for (auto& e : *out) e.first = std::exp(e.first - mx) / sum;
}

}  // namespace graft
