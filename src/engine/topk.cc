#include "engine/topk.h"

#include <algorithm>
#include <cmath>

#include "verify/logit_scan.h"

namespace graft {

void TopKSoftmax(const float* logits, int32_t n_vocab, int32_t k, std::vector<std::pair<float, Token>>* out) {
  TopKLogits(logits, n_vocab, k, out);
  if (out->empty()) return;
  const float mx = out->front().first;
  const float sum = SumExpAbove(logits, n_vocab, mx, mx - 20.0f);
  for (auto& e : *out) e.first = std::exp(e.first - mx) / sum;
}

}  // namespace graft
