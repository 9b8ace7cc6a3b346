// Test helpers: a deterministic fake target model over a tiny vocabulary, and the
// decoding loops (plain and speculative) that the verify tests compare.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "graft/sampling.h"
#include "graft/tree.h"
#include "graft/verify.h"

namespace graft::testing {

// Logits over [0, vocab) as a function of the last `order` tokens of the context.
// With `quantize` the logits are small integers, so argmax ties are common (tests the
// lowest-id tie rule).
class FakeTarget {
 public:
  FakeTarget(int vocab, int order, uint64_t salt, float scale, bool quantize = false)
      : vocab_(vocab), order_(order), salt_(salt), scale_(scale), quantize_(quantize) {}

  int vocab() const { return vocab_; }

  std::vector<float> Logits(std::span<const Token> context) const {
    uint64_t h = salt_ * 0x9e3779b97f4a7c15ULL + 1;
    const size_t n = context.size();
    for (size_t i = n > static_cast<size_t>(order_) ? n - order_ : 0; i < n; ++i) {
      h = Mix(h ^ static_cast<uint64_t>(context[i] + 1));
    }
    std::vector<float> out(static_cast<size_t>(vocab_));
    for (int v = 0; v < vocab_; ++v) {
      const double u = static_cast<double>(Mix(h + static_cast<uint64_t>(v) * 0x632be59bd9b4e019ULL) >> 11) *
                       0x1.0p-53;
      out[v] = quantize_ ? static_cast<float>(static_cast<int>(u * 4)) : static_cast<float>(u * scale_);
    }
    return out;
  }

  Token ArgmaxAfter(std::span<const Token> context) const {
    const auto l = Logits(context);
    return Argmax(l.data(), vocab_);
  }

  Distribution DistAfter(std::span<const Token> context, const SamplingParams& params) const {
    const auto l = Logits(context);
    return MakeDistribution(l.data(), vocab_, params);
  }

 private:
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int vocab_;
  int order_;
  uint64_t salt_;
  float scale_;
  bool quantize_;
};

// Context seen by the target at `node`: the committed tokens (ending with the root's
// token) followed by the path below the root.
inline std::vector<Token> NodeContext(const std::vector<Token>& committed, const TokenTree& tree,
                                      int32_t node) {
  std::vector<Token> ctx = committed;
  const auto path = tree.PathTokens(node);
  ctx.insert(ctx.end(), path.begin() + 1, path.end());
  return ctx;
}

}  // namespace graft::testing
