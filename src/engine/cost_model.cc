#include "engine/cost_model.h"

#include <algorithm>

#include "graft/cost_profile.h"
#include "graft/error.h"

namespace graft {

ContextCost FitContextCost(const std::vector<double>& base_ms, const std::vector<double>& long_ms, int32_t prefix,
                           int32_t long_prefix) {
  ContextCost c{.prefix = prefix};
  const double tokens = long_prefix - prefix;
  if (tokens <= 0) return c;
  // Ordinary least squares of y = fixed + per_row x n, y = (long - base) / tokens.
  double k = 0, sn = 0, sy = 0, snn = 0, sny = 0;
  for (size_t n = 1; n < base_ms.size() && n < long_ms.size(); ++n) {
    if (!(long_ms[n] > 0) || !(base_ms[n] > 0)) continue;
    const double y = (long_ms[n] - base_ms[n]) / tokens;
    k += 1;
    sn += n;
    sy += y;
    snn += static_cast<double>(n) * n;
    sny += n * y;
  }
  if (k < 2 || k * snn - sn * sn <= 0) return c;
  double per_row = (k * sny - sn * sy) / (k * snn - sn * sn);
  double fixed = (sy - per_row * sn) / k;
  // Clamped to >= 0, each refitted alone when the other is clamped.
  if (per_row < 0) {
    per_row = 0;
    fixed = sy / k;
  }
  if (fixed < 0) {
    fixed = 0;
    per_row = sny / snn;
  }
  c.fixed = std::max(0.0, fixed);
  c.per_row = std::max(0.0, per_row);
  return c;
}

CostModel::CostModel(std::vector<double> verify_ms, std::vector<double> draft_ms, const ContextCost& verify_context,
                     const ContextCost& draft_context)
    : verify_ms_(std::move(verify_ms)),
      draft_ms_(std::move(draft_ms)),
      verify_context_(verify_context),
      draft_context_(draft_context) {
  GRAFT_CHECK(verify_ms_.size() >= 2, "empty verify cost curve");
  for (size_t n = 1; n < verify_ms_.size(); ++n) GRAFT_CHECK(verify_ms_[n] > 0, "verify cost must be positive");
  for (size_t n = 1; n < draft_ms_.size(); ++n) GRAFT_CHECK(draft_ms_[n] > 0, "draft cost must be positive");
  for (const ContextCost* c : {&verify_context_, &draft_context_}) {
    GRAFT_CHECK(c->fixed >= 0 && c->per_row >= 0 && c->prefix >= 0, "context costs must not be negative");
  }
  base_verify_ms_ = verify_ms_;
  base_draft_ms_ = draft_ms_;
}

CostModel CostModel::Of(const CostProfile& p) {
  CostModel m(p.verify_ms, p.draft_ms, FitContextCost(p.verify_ms, p.verify_ms_long, p.prefix, p.long_prefix),
              FitContextCost(p.draft_ms, p.draft_ms_long, p.prefix, p.long_prefix));
  m.SetReadRowMs(p.read_row_ms, p.read_ahead_ms);
  if (p.read_product_ms.size() >= 3 && p.read_row_ms > 0) m.SetReadProducts(p.read_product_ms);
  return m;
}

void CostModel::SetReadRowMs(double ms, double ahead_ms) {
  GRAFT_CHECK(ms >= 0 && ahead_ms >= 0, "read cost must not be negative");
  read_row_ms_ = ms;
  read_ahead_ms_ = ahead_ms;
  product_ms_.clear();
}

void CostModel::SetReadProducts(std::vector<double> product_ms) {
  GRAFT_CHECK(product_ms.size() >= 2, "a read curve needs a product of one row");
  for (size_t c = 1; c < product_ms.size(); ++c) GRAFT_CHECK(product_ms[c] >= 0, "read cost must not be negative");
  product_ms_ = std::move(product_ms);
  const int32_t last = static_cast<int32_t>(product_ms_.size()) - 1;
  read_row_ms_ = product_ms_[1];
  read_ahead_ms_ = last >= 2 ? std::max(0.0, (product_ms_[last] - product_ms_[1]) / (last - 1)) : 0.0;
  read_block_ = std::max(1, last);
}

double CostModel::ProductMs(int32_t c) const {
  c = std::max(c, 1);
  const int32_t last = product_ms_.empty() ? 1 : static_cast<int32_t>(product_ms_.size()) - 1;
  if (!product_ms_.empty() && c <= last) return product_ms_[c];
  return (product_ms_.empty() ? read_row_ms_ : product_ms_[last]) + (c - last) * read_ahead_ms_;
}

double CostModel::ReadsMs(int64_t alone, std::span<const int64_t> products) const {
  double ms = static_cast<double>(alone) * read_row_ms_;
  for (size_t c = 2; c < products.size(); ++c) {
    ms += static_cast<double>(products[c]) * (ProductMs(static_cast<int32_t>(c)) - ProductMs(1));
  }
  return ms;
}

void CostModel::SetReadBlock(int32_t rows) {
  GRAFT_CHECK(rows >= 1, "a read block holds at least the root's row");
  read_block_ = rows;
}

double CostModel::ProductChance(std::span<const double> chain, int32_t k) const {
  const int32_t first = (k + 1) / read_block_ * read_block_;  // its product's first position, the root's 0
  if (first == k + 1) return -1.0;
  return first == 0 ? 1.0 : chain[first - 1];
}

int32_t CostModel::ReadAheadLength(std::span<const double> chain) const {
  if (read_block_ < 2 || read_row_ms_ <= 0 || (product_ms_.empty() && read_ahead_ms_ <= 0)) return 0;
  // The chain's expected read ms with its first L nodes hinted, less that with none:
  // the sum over k < L of (hinted price - price alone), each independent of L.
  double saved = 0, best_saved = 0;
  int32_t best = 0;
  for (int32_t k = 0; k < static_cast<int32_t>(chain.size()); ++k) {
    saved += chain[k] * read_row_ms_ - ChainReadMs(chain, k, k + 1);
    if (saved > best_saved + 1e-12) best_saved = saved, best = k + 1;
  }
  return best;
}

double CostModel::ChainReadMs(std::span<const double> chain, int32_t k, int32_t ahead) const {
  const double product = ProductChance(chain, k);
  if (k < ahead && product >= 0) {
    const int32_t place = (k + 1) % read_block_;  // >= 1: not its product's first row
    return product * (ProductMs(place + 1) - ProductMs(place));
  }
  return chain[k] * read_row_ms_;
}

void CostModel::Move(const std::vector<double>& base, const ContextCost& c, int32_t tokens, std::vector<double>* out) {
  const double extra = static_cast<double>(std::max(0, tokens)) - c.prefix;
  for (size_t n = 1; n < base.size(); ++n) {
    (*out)[n] = std::max(0.5 * base[n], base[n] + extra * (c.fixed + c.per_row * static_cast<double>(n)));
  }
}

double CostModel::VerifyPassesMs(const std::vector<int32_t>& pass_rows, double sum_context,
                                 double sum_row_context) const {
  const ContextCost& c = verify_context_;
  double ms = 0, passes = 0, rows = 0;
  for (size_t n = 1; n < pass_rows.size(); ++n) {
    ms += pass_rows[n] * At(base_verify_ms_, static_cast<int32_t>(n));
    passes += pass_rows[n];
    rows += static_cast<double>(n) * pass_rows[n];
  }
  return ms + c.fixed * (sum_context - c.prefix * passes) + c.per_row * (sum_row_context - c.prefix * rows);
}

void CostModel::SetContext(int32_t tokens) {
  Move(base_verify_ms_, verify_context_, tokens, &verify_ms_);
  Move(base_draft_ms_, draft_context_, tokens, &draft_ms_);
}

double CostModel::At(const std::vector<double>& ms, int32_t n) {
  const int32_t last = static_cast<int32_t>(ms.size()) - 1;
  if (n <= 1) return ms[1];
  if (n <= last) return ms[n];
  const int32_t from = std::max(1, last - 4);
  const double slope = last > from ? (ms[last] - ms[from]) / (last - from) : ms[last];
  return ms[last] + std::max(0.0, slope) * (n - last);
}

int32_t CostModel::BestSize(std::span<const double> a, double fixed_ms, int32_t max_n, const BatchLoad& load) const {
  const int32_t limit = std::min<int32_t>(static_cast<int32_t>(a.size()) + 1, max_n);
  double gain = load.tokens + 1.0;
  int32_t best = 1;
  double best_rate = gain / (fixed_ms + VerifyMs(load.rows + 1));
  double read_ms = 0;
  const int32_t ahead = ReadAheadLength(a.first(std::max(0, limit - 1)));
  for (int32_t n = 2; n <= limit; ++n) {
    gain += a[n - 2];
    read_ms += ChainReadMs(a, n - 2, ahead);
    const double rate = gain / (fixed_ms + VerifyMs(load.rows + n) + read_ms);
    if (rate > best_rate) {
      best_rate = rate;
      best = n;
    }
  }
  return best;
}

double CostModel::CeilingSpeedup(int32_t max_n, int32_t* rows) const {
  const std::vector<double> sure(std::max(0, max_n - 1), 1.0);
  const int32_t n = BestSize(sure, 0.0, std::max(1, max_n));  // most tokens per ms: n of them
  const int32_t ahead = ReadAheadLength(sure);                  // as BestSize priced the chain
  double read_ms = 0;
  for (int32_t k = 0; k + 1 < n; ++k) read_ms += ChainReadMs(sure, k, ahead);
  if (rows != nullptr) *rows = n;
  return n * VerifyMs(1) / (VerifyMs(n) + read_ms);
}

Ceiling ProfileCeiling(const CostProfile& profile, int32_t max_n) {
  Ceiling c;
  c.max_n = std::min<int32_t>(max_n, static_cast<int32_t>(profile.verify_ms.size()) - 1);
  if (c.max_n < 1 || (profile.read_ahead_ms > 0 && profile.read_product_ms.empty())) return c;
  c.speedup = CostModel::Of(profile).CeilingSpeedup(c.max_n, &c.rows);
  return c;
}

ReadCounts CountReads(std::span<const int32_t> hinted, std::span<const int32_t> accepted, int32_t read_block) {
  ReadCounts out;
  out.products.assign(std::max(2, read_block + 1), 0);
  read_block = std::max(1, read_block);
  // How far the accepted path follows the hinted chain (the root at 0 always).
  size_t reached = 1;
  while (reached < accepted.size() && reached < hinted.size() && accepted[reached] == hinted[reached]) ++reached;
  std::vector<int32_t> computed;
  for (size_t first = 0; first < hinted.size(); first += read_block) {
    if (first > 0 && first >= reached) break;  // the path never asks for its first row
    const size_t end = std::min(hinted.size(), first + read_block);
    if (end - first >= 2) {
      ++out.products[end - first];
      if (first > 0) ++out.alone;  // a later product's first row, as ReadsMs counts it
      computed.insert(computed.end(), hinted.begin() + first, hinted.begin() + end);
    }
  }
  for (size_t k = 1; k < accepted.size(); ++k) {
    out.alone += std::find(computed.begin(), computed.end(), accepted[k]) == computed.end();
  }
  return out;
}

std::vector<int32_t> ReadAheadNodes(std::span<const int32_t> parent, std::span<const double> a, const CostModel& cost) {
  const int32_t n = static_cast<int32_t>(parent.size());
  std::vector<int32_t> best(n, -1);  // each node's likeliest child
  for (int32_t i = 1; i < n; ++i) {
    int32_t& b = best[parent[i]];
    if (b < 0 || a[i] > a[b]) b = i;
  }
  std::vector<int32_t> out{0};
  std::vector<double> chain;
  for (int32_t i = n > 0 ? best[0] : -1; i >= 0; i = best[i]) {
    out.push_back(i);
    chain.push_back(a[i]);
  }
  out.resize(1 + cost.ReadAheadLength(chain));
  return out;
}

int32_t CostModel::CheapestSizeFrom(int32_t n, int32_t max_n, int32_t other_rows) const {
  int32_t best = std::max(1, n);
  for (int32_t m = best + 1; m <= max_n; ++m) {
    if (VerifyMs(other_rows + m) < VerifyMs(other_rows + best)) best = m;
  }
  return best;
}

int32_t LossBudget::MaxRows(const CostModel& cost, int32_t max_n, int32_t other_rows, double first_accept) const {
  if (o_.allowance < 0) return std::max(1, max_n);
  const double one = cost.VerifyMs(other_rows + 1);
  const double room =
      o_.allowance * plain_ms_ + o_.grant * cost.VerifyMs(1) - excess_ms_ +
      o_.prefill_share * prefill_ms_ *
          std::clamp(static_cast<double>(tokens_ - o_.prefill_after) / std::max<int64_t>(1, o_.prefill_over), 0.0, 1.0);
  const double limit = 1.0 - first_accept <= o_.sure_miss ? room + o_.sure_cap * cost.VerifyMs(1) : room;
  int32_t n = 1;  // every size up to it fits: BestSize may pick any of them
  // A bet that fails also wasted the rows read ahead with its root's (a lazy pass).
  while (n < max_n && cost.VerifyMs(other_rows + n + 1) - one + cost.WastedReadAheadMs(n + 1) <= limit) ++n;
  return n;
}

double CostModel::PrefillMs(int64_t tokens) const {
  const int32_t last = static_cast<int32_t>(base_verify_ms_.size()) - 1;
  if (last < 1 || tokens <= 0) return 0.0;
  return static_cast<double>(tokens) * (base_verify_ms_[last] / last);
}

double CostModel::DraftCatchUpMs(int32_t rows) const {
  if (draft_ms_.size() < 2 || rows <= 1) return 0.0;
  const int32_t last = static_cast<int32_t>(draft_ms_.size()) - 1;
  const double ms = rows <= last ? draft_ms_[rows] : rows * (draft_ms_[last] / last);
  return std::max(0.0, ms - draft_ms_[1]);
}

double SharedDraftMs(const CostModel& cost, std::span<const DraftOffer> drafting) {
  double ms = 0;
  for (int32_t pass = 0;; ++pass) {
    int32_t rows = 0;
    bool any = false;
    for (const DraftOffer& o : drafting) {
      if (o.passes <= pass) continue;
      any = true;
      rows += pass == 0 ? o.catch_up : o.level_rows;
    }
    if (!any) return ms;
    if (rows > 0) ms += cost.DraftMs(rows);
  }
}

std::vector<bool> ChooseDrafts(const CostModel& cost, const BatchLoad& load, std::span<const DraftOffer> required,
                               std::span<const DraftOffer> offers) {
  std::vector<size_t> order(offers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return offers[a].tokens_with - offers[a].tokens_without > offers[b].tokens_with - offers[b].tokens_without;
  });
  int32_t base_rows = load.rows;
  for (const DraftOffer& o : required) base_rows += o.rows_with;
  // Rate of the step when the first k offers of `order` draft.
  std::vector<DraftOffer> drafting(required.begin(), required.end());
  const auto rate = [&](size_t k) {
    drafting.resize(required.size());
    double tokens = load.tokens;
    int32_t rows = base_rows;
    for (size_t j = 0; j < order.size(); ++j) {
      const DraftOffer& o = offers[order[j]];
      if (j < k) drafting.push_back(o);
      tokens += j < k ? o.tokens_with : o.tokens_without;
      rows += j < k ? o.rows_with : o.rows_without;
    }
    return tokens / (SharedDraftMs(cost, drafting) + cost.VerifyMs(rows));
  };
  size_t best = 0;
  double best_rate = rate(0);
  for (size_t k = 1; k <= order.size(); ++k) {
    const double r = rate(k);
    if (r > best_rate) best_rate = r, best = k;
  }
  std::vector<bool> chosen(offers.size(), false);
  for (size_t j = 0; j < best; ++j) chosen[order[j]] = true;
  return chosen;
}

DraftGate::Plan DraftGate::BestPlan(const CostModel& cost, double alpha, int32_t max_depth, int32_t level_rows) {
  Plan best;
  std::vector<double> chain(std::max(0, max_depth));
  for (int32_t d = 0; d < max_depth; ++d) chain[d] = d == 0 ? alpha : chain[d - 1] * alpha;
  const int32_t ahead = cost.ReadAheadLength(chain);
  double tokens = 1, read_ms = 0;
  for (int32_t d = 1; d <= max_depth; ++d) {
    tokens += chain[d - 1];
    read_ms += cost.ChainReadMs(chain, d - 1, ahead);
    const double ms = cost.DraftMs(1) + (d - 1) * cost.DraftMs(level_rows) + cost.VerifyMs(d + 1) + read_ms;
    if (tokens / ms > best.rate) best = {d, tokens, tokens / ms};
  }
  return best;
}

double DraftGate::DraftRate(const CostModel& cost, double alpha, int32_t max_depth, int32_t level_rows) {
  return BestPlan(cost, alpha, max_depth, level_rows).rate;
}

bool DraftGate::Pays(const CostModel& cost, double alpha, int32_t max_depth, int32_t level_rows, int32_t catch_up,
                     int32_t remaining, bool measured) const {
  // Drafting must beat plain decoding too: a retrieval arm slower than a 1-row pass
  // can always fall back to one.
  const double r_retrieve = std::max(RetrievalRate(cost), 1.0 / cost.VerifyMs(1));
  double r_draft = DraftRate(cost, alpha, max_depth, level_rows);
  if (measured && drafted_.seen > 0) r_draft = std::min(r_draft, drafted_.rate);
  if (!(r_draft > r_retrieve)) return false;
  // ms saved over the rest of the request against the draft's catch-up.
  const double saved = std::max(0, remaining) * (1.0 / r_retrieve - 1.0 / r_draft);
  return saved > cost.DraftCatchUpMs(catch_up);
}

bool DraftGate::ShouldDraft(const CostModel& cost, int32_t max_depth, int32_t level_rows, int32_t catch_up,
                            int32_t remaining) {
  ++step_;
  if (max_depth < 1) return false;
  if (Pays(cost, Accept(), max_depth, level_rows, catch_up, remaining, /*measured=*/true)) {
    decision_accept_ = Accept();
    return true;
  }
  if (step_ < next_explore_) return false;
  next_explore_ *= 2;
  decision_accept_ = o_.max_accept;
  // Exploring tries the draft again whatever its measured rate said: the text moves on.
  return Pays(cost, o_.max_accept, max_depth, level_rows, catch_up, remaining, /*measured=*/false);
}

void DraftGate::ObserveDraft(int32_t levels, int32_t accepted) {
  for (int32_t i = 0; i < levels; ++i) {
    levels_ = o_.forget * levels_ + 1;
    accepted_ = o_.forget * accepted_ + (i < accepted ? 1 : 0);
  }
}

void DraftGate::StepRate::Add(int32_t tokens, double ms, double ema) {
  if (!(ms > 0)) return;
  const double r = tokens / ms;
  rate = seen == 0 ? r : (1 - ema) * rate + ema * r;
  ++seen;
}

void DraftGate::ObserveDrafted(int32_t tokens, double ms) { drafted_.Add(tokens, ms, o_.ema); }

void DraftGate::ObserveRetrieval(int32_t tokens, double ms) { retrieval_.Add(tokens, ms, o_.ema); }

}  // namespace graft
