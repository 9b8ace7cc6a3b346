#include "engine/topk.h"

#include <algorithm>
#include <cmath>

namespace graft {

void TopKSoftmax(const float* logits, int32_t n_vocab, int32_t k, std::vector<std::pair<float, Token>>* out) {
  out->clear();
  // A min-heap (by this order) of the k best logits.
  auto better = [](const std::pair<float, Token>& a, const std::pair<float, Token>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (static_cast<int32_t>(out->size()) < k) {
      out->push_back({logits[i], i});
      std::push_heap(out->begin(), out->end(), better);
    } else if (logits[i] > out->front().first) {
      std::pop_heap(out->begin(), out->end(), better);
      out->back() = {logits[i], i};
      std::push_heap(out->begin(), out->end(), better);
    }
  }
  std::sort_heap(out->begin(), out->end(), better);  // best first
  if (out->empty()) return;
  const float mx = out->front().first;
  const float cut = mx - 20.0f;
  float sum = 0.0f;
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (logits[i] > cut) sum += std::exp(logits[i] - mx);
  }
  for (auto& e : *out) e.first = std::exp(e.first - mx) / sum;
}

}  // namespace graft
