#include "graft/shadow.h"

#include <utility>

namespace graft {

void ShadowTrials::Add(TokenTree tree, std::span<const int32_t> verified) {
  if (tree.size() <= 1) return;
  std::vector<uint8_t> skip(tree.size(), 0);
  for (int32_t k : verified) skip[k] = 1;
  bool left = false;
  for (int32_t i = 1; i < tree.size(); ++i) {
    skip[i] = skip[i] || tree.source[i] == Source::kOracle;
    left = left || skip[i] == 0;
  }
  if (!left) return;  // nothing to record
  if (pending_.size() >= kMaxPending) pending_.pop_front();
  pending_.push_back(Pending{std::move(tree), std::move(skip), 0});
}

void ShadowTrials::Commit(std::span<const Token> emitted, Calibration* calibration) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = *it;
    bool alive = true;
    for (size_t k = 0; k < emitted.size() && alive; ++k) {
      // The children of the followed node were tested by this token.
      int32_t next = -1;
      bool any = false;
      for (int32_t c = p.at + 1; c < p.tree.size(); ++c) {
        if (p.tree.parent[c] != p.at) continue;
        any = true;
        const bool accepted = p.tree.token[c] == emitted[k];
        if (accepted) next = c;
        if (p.skip[c] == 0) calibration->Record(p.tree.source[c], p.tree.prob[c], p.tree.depth[c], accepted);
      }
      alive = any && next >= 0;
      p.at = next;
    }
    it = alive ? it + 1 : pending_.erase(it);
  }
}

}  // namespace graft
