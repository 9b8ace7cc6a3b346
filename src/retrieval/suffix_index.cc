#include <algorithm>
#include <stdexcept>
#include <string>

#include "graft/error.h"
#include "graft/retrieval_suffix.h"
#include "retrieval/continuation.h"

namespace graft {
namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};
constexpr int32_t kInitialLogCapacity = 10;

inline uint64_t Key(int32_t state, Token t) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(t);
}

Error TooManyTokens(const std::string& what, int64_t n_tokens) {
  return Error(what + ": " + std::to_string(n_tokens) + " tokens is over the limit of " +
               std::to_string(SuffixIndex::kMaxTokens) +
               " (2^30) tokens per suffix index; use a smaller history or context");
}

}  // namespace

SuffixIndex::SuffixIndex(const RetrievalOptions& options, Source source)
    : options_(options), source_(source) {
  keys_.assign(size_t{1} << kInitialLogCapacity, kEmpty);
  values_.assign(keys_.size(), -1);
  table_shift_ = 64 - kInitialLogCapacity;
  Clear();
}

void SuffixIndex::Clear() {
  text_.clear();
  states_.clear();
  kids_.clear();
  edge_token_.clear();
  edge_next_.clear();
  if (table_count_ > 0) std::fill(keys_.begin(), keys_.end(), kEmpty);
  table_count_ = 0;
  transitions_ = 0;
  NewState(0, false);  // root
  last_ = 0;
}

void SuffixIndex::Reserve(int64_t n) {
  if (n > kMaxTokens) throw TooManyTokens("SuffixIndex::Reserve", n);
  n = std::max<int64_t>(n, 0);
  text_.reserve(n);
  states_.reserve(2 * n + 1);
  kids_.reserve(3 * n + 1);
  edge_token_.reserve(n);
  edge_next_.reserve(n);
  while (static_cast<int64_t>(keys_.size()) < 2 * n) GrowTable();  // ~n overflow transitions
}

size_t SuffixIndex::MemoryBytes() const {
  return text_.capacity() * sizeof(Token) + states_.capacity() * sizeof(State) +
         kids_.capacity() * sizeof(Kid) + edge_token_.capacity() * sizeof(Token) +
         edge_next_.capacity() * sizeof(int32_t) + keys_.capacity() * sizeof(uint64_t) +
         values_.capacity() * sizeof(int32_t);
}

int32_t SuffixIndex::NewState(int32_t len, bool clone) {
  State s;
  s.len = static_cast<uint32_t>(len);
  s.clone = clone ? 1 : 0;
  s.link = -1;
  s.tok0 = kNoEdge;
  s.to0 = -1;
  s.edge_head = -1;
  s.kid_head = -1;
  s.my_kid = -1;
  states_.push_back(s);
  return static_cast<int32_t>(states_.size()) - 1;
}

int64_t SuffixIndex::FindSlot(uint64_t key) const {
  const uint64_t mask = keys_.size() - 1;
  uint64_t slot = (key * 0x9E3779B97F4A7C15ull) >> table_shift_;
  while (keys_[slot] != key && keys_[slot] != kEmpty) slot = (slot + 1) & mask;
  return static_cast<int64_t>(slot);
}

int32_t SuffixIndex::Get(int32_t state, Token t) const {
  const State& s = states_[state];
  if (s.tok0 == t) return s.to0;
  if (s.edge_head < 0) return -1;
  const int64_t slot = FindSlot(Key(state, t));
  return keys_[slot] == kEmpty ? -1 : values_[slot];
}

bool SuffixIndex::HasRealTransition(int32_t state) const {
  const State& s = states_[state];
  // Tokens of one state are distinct and only kSeparator is negative, so two or more
  // transitions include a real one.
  return s.tok0 >= 0 || (s.tok0 != kNoEdge && s.edge_head >= 0);
}

void SuffixIndex::GrowTable() {
  std::vector<uint64_t> old_keys(keys_.size() * 2, kEmpty);
  std::vector<int32_t> old_values(keys_.size() * 2, -1);
  old_keys.swap(keys_);
  old_values.swap(values_);
  --table_shift_;
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmpty) continue;
    const int64_t slot = FindSlot(old_keys[i]);
    keys_[slot] = old_keys[i];
    values_[slot] = old_values[i];
  }
}

void SuffixIndex::AddTransition(int32_t state, Token t, int32_t target) {
  ++transitions_;
  State& s = states_[state];
  if (s.tok0 == kNoEdge) {
    s.tok0 = t;
    s.to0 = target;
    return;
  }
  if ((table_count_ + 1) * 4 > static_cast<int64_t>(keys_.size()) * 3) GrowTable();
  const uint64_t key = Key(state, t);
  const int64_t slot = FindSlot(key);
  keys_[slot] = key;
  values_[slot] = target;
  ++table_count_;
  edge_token_.push_back(t);
  edge_next_.push_back(s.edge_head);
  s.edge_head = static_cast<int32_t>(edge_token_.size()) - 1;
}

void SuffixIndex::Redirect(int32_t state, Token t, int32_t target) {
  State& s = states_[state];
  if (s.tok0 == t) s.to0 = target;
  else values_[FindSlot(Key(state, t))] = target;
}

void SuffixIndex::Attach(int32_t parent, int32_t child) {
  states_[child].link = parent;
  kids_.push_back({child, states_[parent].kid_head});
  states_[parent].kid_head = static_cast<int32_t>(kids_.size()) - 1;
  states_[child].my_kid = states_[parent].kid_head;
}

void SuffixIndex::Append(TokenSpan tokens) {
  for (Token t : tokens) Append(t);
}

// Standard online SAM extension (Blumer et al.), plus link-tree child records.
void SuffixIndex::Append(Token c) {
  if (c < 0 && c != kSeparator)
    throw std::invalid_argument("SuffixIndex::Append: negative token " + std::to_string(c));
  if (size() >= kMaxTokens) throw TooManyTokens("SuffixIndex::Append", size() + 1);
  text_.push_back(c);
  const int32_t cur = NewState(static_cast<int32_t>(states_[last_].len) + 1, false);
  int32_t p = last_;
  int32_t q = -1;
  while (p >= 0) {
    q = Get(p, c);
    if (q >= 0) break;
    AddTransition(p, c, cur);
    p = states_[p].link;
  }
  if (p < 0) {
    Attach(0, cur);
  } else if (states_[p].len + 1 == states_[q].len) {
    Attach(q, cur);
  } else {
    const int32_t clone = NewState(static_cast<int32_t>(states_[p].len) + 1, true);
    {
      const State src = states_[q];
      if (src.tok0 != kNoEdge) AddTransition(clone, src.tok0, src.to0);
      for (int32_t e = src.edge_head; e >= 0; e = edge_next_[e])
        AddTransition(clone, edge_token_[e], values_[FindSlot(Key(q, edge_token_[e]))]);
    }
    // The clone takes q's place (and record) under q's old link; q moves under the clone.
    State& qs = states_[q];
    State& cs = states_[clone];
    cs.link = qs.link;
    cs.my_kid = qs.my_kid;
    kids_[qs.my_kid].state = clone;
    Attach(clone, q);
    Attach(clone, cur);
    while (p >= 0 && Get(p, c) == q) {
      Redirect(p, c, clone);
      p = states_[p].link;
    }
  }
  last_ = cur;
}

SuffixIndex::Match SuffixIndex::LongestMatch(TokenSpan context) const {
  size_t begin = context.size();
  while (begin > 0 && context[begin - 1] >= 0 &&
         context.size() - begin < static_cast<size_t>(std::max(options_.max_match, 0)))
    --begin;
  int32_t v = 0, l = 0;
  for (size_t i = begin; i < context.size(); ++i) {
    const Token t = context[i];
    for (;;) {
      const int32_t next = Get(v, t);
      if (next >= 0) {
        v = next;
        ++l;
        break;
      }
      if (v == 0) {
        l = 0;
        break;
      }
      v = states_[v].link;
      l = states_[v].len;
    }
  }
  // Shrink until some occurrence is followed by a real token (a transition on t >= 0).
  while (v != 0 && !HasRealTransition(v)) {
    v = states_[v].link;
    l = states_[v].len;
  }
  return {v, l};
}

void SuffixIndex::Occurrences(int32_t state, int32_t limit, std::vector<int64_t>* ends) const {
  if (state <= 0 || state >= num_states() || limit <= 0) return;
  // DFS over the link subtree; the stack holds the next child record to visit per level.
  struct Frame {
    int32_t kid;
  };
  std::vector<Frame> stack;
  stack.reserve(32);
  int32_t found = 0;
  auto visit = [&](int32_t v) {
    const State& s = states_[v];
    if (!s.clone) {
      ends->push_back(static_cast<int64_t>(s.len) - 1);  // a prefix state: ends at len - 1
      ++found;
    }
    if (s.kid_head >= 0) stack.push_back({s.kid_head});
  };
  visit(state);
  while (!stack.empty() && found < limit) {
    Frame& top = stack.back();
    const Kid k = kids_[top.kid];
    if (k.next >= 0) top.kid = k.next;
    else stack.pop_back();
    visit(k.state);
  }
}

void SuffixIndex::CollectStarts(int32_t state, int32_t limit, std::vector<int64_t>* starts) const {
  // One extra: the occurrence ending at the text end (no continuation) is dropped.
  Occurrences(state, limit + 1, starts);
  const int64_t n = size();
  auto end = std::remove(starts->begin(), starts->end(), n - 1);
  starts->erase(end, starts->end());
  if (static_cast<int32_t>(starts->size()) > limit) starts->resize(limit);
  for (int64_t& s : *starts) ++s;
}

void SuffixIndex::Query(TokenSpan context, int32_t budget, CandidateTrie* out) const {
  out->clear();
  out->source = source_;
  if (budget <= 0) return;
  const Match m = LongestMatch(context);
  if (m.length <= 0 || m.length < options_.min_match) return;
  std::vector<int64_t> starts;
  starts.reserve(options_.max_occurrences + 1);
  CollectStarts(m.state, std::max(options_.max_occurrences, 1), &starts);
  retrieval_internal::ExpandOccurrences(text_, starts, m.length, budget, options_, out);
}

std::string SuffixIndex::Validate() const {
  const int32_t ns = num_states();
  const int64_t n = size();
  if (ns < 1 || states_[0].len != 0 || states_[0].link != -1) return "bad root";
  int64_t ends = 0, transitions = 0, overflow = 0, live_kids = 0;
  for (int32_t v = 0; v < ns; ++v) {
    const State& s = states_[v];
    const std::string at = "state " + std::to_string(v) + ": ";
    if (v > 0) {
      if (s.link < 0 || s.link >= ns) return at + "link out of range";
      if (states_[s.link].len >= s.len) return at + "link not shorter";
      if (s.len > n) return at + "longer than the text";
      if (!s.clone) ++ends;
    }
    if (s.tok0 == kNoEdge && s.edge_head >= 0) return at + "overflow transitions without an inline one";
    auto check = [&](Token t, int32_t u) -> std::string {
      ++transitions;
      if (u < 0 || u >= ns) return at + "transition target out of range";
      if (states_[u].len < s.len + 1) return at + "transition target too short";
      if (Get(v, t) != u) return at + "lookup disagrees with the stored transition";
      return "";
    };
    if (s.tok0 != kNoEdge) {
      if (auto e = check(s.tok0, s.to0); !e.empty()) return e;
    }
    for (int32_t e = s.edge_head; e >= 0; e = edge_next_[e]) {
      ++overflow;
      if (edge_token_[e] == s.tok0) return at + "duplicate transition token";
      const int64_t slot = FindSlot(Key(v, edge_token_[e]));
      if (keys_[slot] == kEmpty) return at + "listed transition missing from the table";
      if (auto err = check(edge_token_[e], values_[slot]); !err.empty()) return err;
    }
    for (int32_t k = s.kid_head; k >= 0; k = kids_[k].next) {
      const int32_t c = kids_[k].state;
      if (c <= 0 || c >= ns) return at + "child record out of range";
      if (states_[c].link != v) return at + "child record's state has another link";
      if (states_[c].my_kid != k) return at + "child record is not the state's own";
      ++live_kids;
    }
  }
  if (ends != n) return "non-clone states != tokens";
  if (overflow != table_count_) return "overflow list count != table count";
  if (transitions != transitions_) return "transition count mismatch";
  if (live_kids != ns - 1) return "link tree does not cover every state exactly once";
  if (static_cast<int64_t>(states_[last_].len) != n) return "last state is not the whole text";
  return "";
}

// ---------------------------------------------------------------- HistoryIndex

HistoryIndex::HistoryIndex(const HistoryOptions& options)
    : options_(options), index_(options.retrieval, Source::kRequest) {
  if (options.capacity_tokens > SuffixIndex::kMaxTokens)
    throw TooManyTokens("HistoryIndex capacity", options.capacity_tokens);
}

void HistoryIndex::AddOutput(TokenSpan output) {
  const int64_t cap = std::max<int64_t>(options_.capacity_tokens, 2);
  const int64_t add = static_cast<int64_t>(output.size()) + 1;
  if (index_.size() + add <= cap) {
    outputs_.emplace_back(output.begin(), output.end());
    index_.Append(output);
    index_.Append(SuffixIndex::kSeparator);
    return;
  }
  // Evict: keep the newest outputs (this one included) that fit in cap / 2.
  const int64_t keep_cap = cap / 2;
  std::vector<Token> newest(output.end() - std::min<int64_t>(add - 1, keep_cap - 1), output.end());
  outputs_.emplace_back(std::move(newest));
  int64_t total = 0;
  size_t first = outputs_.size();
  while (first > 0 && total + static_cast<int64_t>(outputs_[first - 1].size()) + 1 <= keep_cap) {
    total += static_cast<int64_t>(outputs_[first - 1].size()) + 1;
    --first;
  }
  outputs_.erase(outputs_.begin(), outputs_.begin() + first);
  index_.Clear();
  for (const auto& o : outputs_) {
    index_.Append(o);
    index_.Append(SuffixIndex::kSeparator);
  }
}

void HistoryIndex::Clear() {
  outputs_.clear();
  index_.Clear();
}

size_t HistoryIndex::MemoryBytes() const {
  size_t bytes = index_.MemoryBytes();
  for (const auto& o : outputs_) bytes += o.capacity() * sizeof(Token);
  return bytes;
}

std::string HistoryIndex::Validate() const {
  int64_t total = 0;
  for (const auto& o : outputs_) total += static_cast<int64_t>(o.size()) + 1;
  if (total != index_.size()) return "outputs do not match the index size";
  if (index_.size() > std::max<int64_t>(options_.capacity_tokens, 2)) return "over capacity";
  return index_.Validate();
}

// ------------------------------------------------------------ RequestRetriever

RequestRetriever::RequestRetriever(const RetrievalOptions& options, const HistoryIndex* history)
    : index_(options, Source::kRequest), history_(history) {}

void RequestRetriever::Reset(TokenSpan prompt) {
  index_.Clear();
  index_.Append(prompt);
}

void RequestRetriever::Query(TokenSpan context, int32_t budget, CandidateTrie* out) const {
  if (history_ == nullptr || history_->size() == 0) {
    index_.Query(context, budget, out);
    return;
  }
  CandidateTrie local, past;
  index_.Query(context, budget, &local);
  history_->Query(context, budget, &past);
  MergeTries(local, past, budget, out);
  out->source = Source::kRequest;
}

}  // namespace graft
