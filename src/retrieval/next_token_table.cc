#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>

#include "graft/retrieval_next_token.h"

namespace graft {

NextTokenTable::NextTokenTable(int32_t vocab_size, const NextTokenOptions& options)
    : options_(options), row_of_(std::max(vocab_size, 0), -1) {
  if (options_.k < 1 || options_.k > 255)
    throw std::invalid_argument("NextTokenTable: k must be in [1, 255]");
}

void NextTokenTable::Clear() {
  std::fill(row_of_.begin(), row_of_.end(), -1);
  next_.clear();
  score_.clear();
  row_size_.clear();
}

size_t NextTokenTable::MemoryBytes() const {
  return row_of_.capacity() * sizeof(int32_t) + next_.capacity() * sizeof(Token) +
         score_.capacity() * sizeof(float) + row_size_.capacity();
}

std::span<const Token> NextTokenTable::Next(Token prev) const {
  if (prev < 0 || prev >= vocab_size() || row_of_[prev] < 0) return {};
  const int32_t r = row_of_[prev];
  return {next_.data() + static_cast<size_t>(r) * options_.k, row_size_[r]};
}

std::span<const float> NextTokenTable::Scores(Token prev) const {
  if (prev < 0 || prev >= vocab_size() || row_of_[prev] < 0) return {};
  const int32_t r = row_of_[prev];
  return {score_.data() + static_cast<size_t>(r) * options_.k, row_size_[r]};
}

void NextTokenTable::Update(Token prev, std::span<const Token> topk_next,
                            std::span<const float> probs) {
  if (prev < 0 || prev >= vocab_size()) return;
  const size_t k = static_cast<size_t>(options_.k);
  const size_t m = std::min(topk_next.size(), probs.size());
  std::vector<std::pair<float, Token>> merged;  // (score, token)
  merged.reserve(m + k);
  auto contains = [&](Token t) {
    for (const auto& [s, x] : merged) if (x == t) return true;
    return false;
  };
  for (size_t i = 0; i < m; ++i) {
    const Token t = topk_next[i];
    const float p = probs[i];
    if (t < 0 || t >= vocab_size() || !(p > 0.0f) || contains(t)) continue;
    merged.emplace_back(p, t);
  }
  int32_t r = row_of_[prev];
  if (r >= 0 && options_.decay > 0.0f) {
    const Token* old_t = next_.data() + static_cast<size_t>(r) * k;
    const float* old_s = score_.data() + static_cast<size_t>(r) * k;
    for (size_t i = 0; i < row_size_[r]; ++i) {
      const float s = old_s[i] * options_.decay;
      if (s > 0.0f && !contains(old_t[i])) merged.emplace_back(s, old_t[i]);
    }
  }
  if (merged.empty() && r < 0) return;
  std::stable_sort(merged.begin(), merged.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (merged.size() > k) merged.resize(k);
  if (r < 0) {
    r = rows();
    row_of_[prev] = r;
    next_.resize(next_.size() + k, kNoToken);
    score_.resize(score_.size() + k, 0.0f);
    row_size_.push_back(0);
  }
  Token* row_t = next_.data() + static_cast<size_t>(r) * k;
  float* row_s = score_.data() + static_cast<size_t>(r) * k;
  for (size_t i = 0; i < k; ++i) {
    row_t[i] = i < merged.size() ? merged[i].second : kNoToken;
    row_s[i] = i < merged.size() ? merged[i].first : 0.0f;
  }
  row_size_[r] = static_cast<uint8_t>(merged.size());
}

namespace {
struct Pending {
  float path_prob;
  float prob;
  int32_t depth;
  int32_t order;   // push order, the final tie-break (earlier first)
  Token token;
  int32_t parent;
};
struct Worse {
  bool operator()(const Pending& a, const Pending& b) const {
    if (a.path_prob != b.path_prob) return a.path_prob < b.path_prob;
    if (a.depth != b.depth) return a.depth > b.depth;
    return a.order > b.order;
  }
};
}  // namespace

void NextTokenTable::Query(TokenSpan context, int32_t budget, CandidateTrie* out) const {
  out->clear();
  out->source = Source::kRecycle;
  if (budget <= 0 || context.empty()) return;
  std::priority_queue<Pending, std::vector<Pending>, Worse> frontier;
  int32_t order = 0;
  auto push_children = [&](Token t, int32_t depth, int32_t parent, float parent_path) {
    if (depth > options_.max_depth) return;
    const auto next = Next(t);
    const auto scores = Scores(t);
    for (size_t i = 0; i < next.size(); ++i) {
      const float p = std::min(scores[i], 1.0f);
      frontier.push({parent_path * p, p, depth, order++, next[i], parent});
    }
  };
  push_children(context.back(), 1, -1, 1.0f);
  while (!frontier.empty() && out->size() < budget) {
    const Pending node = frontier.top();
    frontier.pop();
    const int32_t index = out->Add(node.parent, node.token, node.prob);
    push_children(node.token, node.depth + 1, index, out->path_prob[index]);
  }
}

std::string NextTokenTable::Validate() const {
  const size_t k = static_cast<size_t>(options_.k);
  if (next_.size() != row_size_.size() * k || score_.size() != next_.size())
    return "row arrays have different sizes";
  std::vector<int32_t> owners(row_size_.size(), 0);
  for (size_t t = 0; t < row_of_.size(); ++t) {
    const int32_t r = row_of_[t];
    if (r < -1 || r >= rows()) return "row index out of range for token " + std::to_string(t);
    if (r >= 0 && ++owners[r] > 1) return "row shared by two tokens";
  }
  for (int32_t r = 0; r < rows(); ++r) {
    if (owners[r] != 1) return "orphan row " + std::to_string(r);
    if (row_size_[r] > k) return "row size > k";
    const Token* row_t = next_.data() + static_cast<size_t>(r) * k;
    const float* row_s = score_.data() + static_cast<size_t>(r) * k;
    for (size_t i = 0; i < row_size_[r]; ++i) {
      if (row_t[i] < 0 || row_t[i] >= vocab_size()) return "successor out of range";
      if (!(row_s[i] > 0.0f) || !std::isfinite(row_s[i])) return "score not positive";
      if (i > 0 && row_s[i] > row_s[i - 1]) return "scores not descending";
      for (size_t j = 0; j < i; ++j)
        if (row_t[j] == row_t[i]) return "duplicate successor";
    }
  }
  return "";
}

}  // namespace graft
