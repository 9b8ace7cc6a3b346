// What this machine charges for speculation, and the two decisions the graft method
// takes from it each step. Pure C++ (no llama.h): tested without a model.
//
// On a CPU a target pass over N tree nodes costs far more than one token once N
// grows (measured here, Qwen2.5-Coder 1.5B Q4_K_M, 2 threads: N = 4 costs 2.7x,
// N = 8 4.4x, N = 16 5.2x a single token; N = 15 costs more than N = 16 because
// llama.cpp's kernels work in row blocks), and a draft-model level costs about half
// a target token. So the tree that maximises throughput is usually small, and the
// draft model pays only when it is accepted often. CostModel chooses the tree size
// that maximises expected tokens per millisecond; DraftGate decides whether to run
// the draft model at all from those costs and the acceptance it has observed.
//
// Both take only deterministic inputs: the cost curves come from a cached profile
// (graft/cost_profile.h), not from timing the current run, and the gate is fed
// modelled step costs. So the same request, seed and profile give the same tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace graft {

// What the other requests put into the same target pass (EngineGroup): their rows
// (trees and prefill chunks) and the tokens they are expected to emit. A tree sized
// against it maximises the tokens per ms of the whole pass, not of its own request:
// under load, each request's extra rows buy less and trees shrink.
struct BatchLoad {
  int32_t rows = 0;
  double tokens = 0;
};

// How a pass's cost grows with the tokens in its cache: every row's attention reads
// every cached token (measured on a 2-core EPYC, 1.5B target: at 1,536 cached tokens
// each extra row cost 36% more than at 256, the first row 10% more). Modelled as
//   ms of a pass over n rows at L cached tokens = (its ms at `prefix`) + (L - prefix) x (fixed + per_row x n),
// fitted to the curve measured at a second, longer prefix (FitContextCost).
struct ContextCost {
  int32_t prefix = 0;    // cached tokens of the base curves
  double fixed = 0;      // ms per cached token, per pass
  double per_row = 0;    // ms per cached token, per row
};

// The least-squares fit of `long_ms[n] - base_ms[n]` by (long_prefix - prefix) x
// (fixed + per_row x n) over the sizes n with long_ms[n] > 0 (0 = not measured);
// fixed and per_row are at least 0 (a longer cache never makes a pass cheaper), and
// both are 0 when fewer than two sizes were measured. O(|base_ms|).
ContextCost FitContextCost(const std::vector<double>& base_ms, const std::vector<double>& long_ms, int32_t prefix,
                           int32_t long_prefix);

struct CostProfile;

class CostModel {
 public:
  // The model of a measured profile: its curves, and its ContextCosts fitted to what
  // was timed at its long prefix (none when nothing was).
  static CostModel Of(const CostProfile& profile);

  // `verify_ms[n]`: ms of a target pass over n rows (n >= 1; [0] ignored), at least
  // one size; `draft_ms[n]` likewise for the draft model (may be empty). Both were
  // measured with `*_context.prefix` tokens in the cache; SetContext prices passes at
  // other lengths by the context costs (none given: the same at every length).
  CostModel(std::vector<double> verify_ms, std::vector<double> draft_ms, const ContextCost& verify_context = {},
            const ContextCost& draft_context = {});

  // Modelled ms of target passes counted by rows (`pass_rows[n]` passes over n rows)
  // whose caches held `sum_context` tokens in all, and `sum_row_context` tokens x rows: each pass at its own context by the
  // linear ContextCost (without SetContext's floor), whatever SetContext chose. O(|pass_rows|).
  double VerifyPassesMs(const std::vector<int32_t>& pass_rows, double sum_context, double sum_row_context) const;

  // Prices every later call for passes over caches of `tokens` tokens (target and
  // draft alike): each curve moves by its ContextCost, and no size falls below half
  // its measured cost. The curves are as measured until it is called. O(sizes).
  void SetContext(int32_t tokens);

  // ms of a row a lazy pass reads after its root's (CostProfile::read_row_ms; 0: the
  // pass computes every row's logits, and reading them costs nothing), and of each
  // further row read ahead in one product with it (0: none is): a product of c rows
  // is priced ms + (c - 1) x ahead_ms. Without a measured curve (SetReadProducts).
  void SetReadRowMs(double ms, double ahead_ms = 0);
  // The measured curve: `product_ms[c]` = ms of one product over c rows' logits (c = 1:
  // a row read alone; [0] ignored), c up to the largest product the backend computes
  // (its size - 1, which also sets the read block). On a CPU it is not linear in c:
  // llama.cpp's kernels for the output layer work in column blocks (measured on a
  // 2-core EPYC, 1.5B target: 1 row 6.9 ms, 2 rows 15.1, 3 17.4, 4 19.9, 7 30.1), so a
  // product of two rows costs more than the two read alone. CostProfile::read_product_ms.
  void SetReadProducts(std::vector<double> product_ms);
  // ms of one product over c >= 1 rows (past the measured curve: its last value plus the
  // mean price of a row ahead for each further row; the read block does not cap it, so
  // counted products are priced whatever block the sizing assumes). O(1).
  double ProductMs(int32_t c) const;
  // Modelled ms of reading the logits of `a` accepted nodes after the root's, each
  // alone. O(1).
  double ReadMs(int32_t a) const { return a > 0 ? a * read_row_ms_ : 0.0; }
  // Modelled ms of a lazy pass's reads after its root's: `alone` rows read alone or
  // first of a product, and `products[c]` products over c >= 2 rows ([0], [1] ignored),
  // each costing ProductMs(c) - ProductMs(1) more than its first row (the root's product
  // too: its first row is priced with the pass). GenerationStats::rows_read and
  // read_products. O(|products|).
  double ReadsMs(int64_t alone, std::span<const int64_t> products) const;
  // Rows one product may hold, the root's included (Context::kMaxReadBlock; default 1:
  // none is read ahead). Set by whoever knows the backend.
  void SetReadBlock(int32_t rows);
  int32_t read_block() const { return read_block_; }
  // The most a pass over n rows can spend reading rows ahead that it never uses: when
  // only its root's token is emitted, every row hinted with the root's (at most
  // min(n, read_block) - 1) was read for nothing, ProductMs(those + 1) - ProductMs(1);
  // a later product is computed only when the path reaches it. LossBudget's worst
  // case. O(1).
  double WastedReadAheadMs(int32_t n) const {
    const int32_t c = std::min(n, read_block_);
    return c >= 2 ? std::max(0.0, ProductMs(c) - ProductMs(1)) : 0.0;
  }
  // A chain of nodes after the root, read with probabilities `chain` (descending, e.g.
  // a path's PathAcceptance) is read ahead in successive products of read_block rows,
  // the root's first (Context::HintReads): the first row of a later product is read
  // when the path reaches it, and the product then computes the rest. Returns how many
  // of its nodes a verification hints: the length whose expected read ms, summed over
  // the chain by ChainReadMs, is least (the shortest on ties, so a product's first
  // row is hinted only when one follows it). 0 when none is read ahead. O(|chain|).
  int32_t ReadAheadLength(std::span<const double> chain) const;
  // Expected ms of reading the k-th node (k = 0, 1, ...) of such a chain, of which the
  // first `ahead` are hinted (ReadAheadLength): a hinted node at place j >= 1 of its
  // product (the root's at place 0) costs ProductMs(j + 1) - ProductMs(j) whenever its
  // product is computed (with the chance of the product's first row; the root's 1), so
  // a product's nodes sum to its ProductMs; any other node, chain[k] x ProductMs(1).
  // Tree sizing and the draft gate price a tree by it. O(1).
  double ChainReadMs(std::span<const double> chain, int32_t k, int32_t ahead) const;

  // Expected ms of a target pass over n >= 1 rows: the measured value, or past the
  // last measured size the last value plus the mean slope of the last 4 sizes. O(1).
  double VerifyMs(int32_t n) const { return At(verify_ms_, n); }
  // The same for a draft pass (0 when no draft curve was given). O(1).
  double DraftMs(int32_t n) const { return draft_ms_.size() < 2 ? 0.0 : At(draft_ms_, n); }
  // Modelled ms for the draft to catch up on `rows` tokens it lacks, beyond the one row
  // a draft pass holds anyway: past the measured curve, each row at the per-row cost
  // of the largest measured pass (batched prefill is cheaper per row; an upper bound).
  double DraftCatchUpMs(int32_t rows) const;
  // Modelled ms of prefilling `tokens` prompt tokens: each at the per-row cost of the
  // largest measured target pass, at the profile's prefix. An estimate, not a bound: a
  // batch of 512 costs less per row, a long prompt's attention more (on the 2-core
  // Xeon, 13.2 ms a token against 11 measured for two 1024-token documents). O(1).
  double PrefillMs(int64_t tokens) const;

  // `a`: acceptance probabilities of the candidate non-root nodes in descending
  // order (a parents-closed order, e.g. by PathAcceptance). Returns the tree size
  // n in [1, 1 + a.size()] (root included, at most max_n) maximising
  //   (load.tokens + 1 + sum of the first n - 1 values of a) /
  //   (fixed_ms + VerifyMs(load.rows + n) + the sum of their ChainReadMs, as a chain),
  // i.e. expected tokens per ms of this step's pass (fixed_ms = its other costs;
  // `load` = what other requests put into the same pass). Because every size is
  // measured, a larger n that costs no more than a smaller one (a full row block)
  // wins whenever there are candidates to fill it. O(|a|).
  int32_t BestSize(std::span<const double> a, double fixed_ms, int32_t max_n, const BatchLoad& load = {}) const;

  // The most graft's verification can gain over plain decoding under this model, a
  // bound on every proposer it verifies (the oracle's included): each proposal right,
  // so a pass over n rows, a chain, emits n tokens and reads its n - 1 rows after the
  // root as verification would (read ahead where that is cheaper). Returns the largest
  //   n x VerifyMs(1) / (VerifyMs(n) + those reads)
  // over n in [1, max_n] (1.0 at n = 1: plain decoding), at the context SetContext
  // chose; `*rows` gets that n. On a 2-core AVX2 EPYC (1.5B target, 32 rows) 1.75x,
  // where a GPU's flat curve gives nearly max_n. O(max_n).
  double CeilingSpeedup(int32_t max_n, int32_t* rows = nullptr) const;

  // The size in [n, max_n] whose pass, with `other_rows` more rows in it, costs least
  // (the smallest on ties): n rows are never worth verifying when a larger pass (a
  // full row block) costs less; pad them to this size instead. O(max_n - n).
  int32_t CheapestSizeFrom(int32_t n, int32_t max_n, int32_t other_rows = 0) const;

 private:
  static double At(const std::vector<double>& ms, int32_t n);
  // The chance that the product holding the k-th node of a chain (ReadAheadLength) is
  // computed: that of its first row, the root's 1; -1 when the node is its first row.
  double ProductChance(std::span<const double> chain, int32_t k) const;
  static void Move(const std::vector<double>& base, const ContextCost& c, int32_t tokens, std::vector<double>* out);
  std::vector<double> verify_ms_;  // [sizes + 1], [0] unused: at the context SetContext chose
  std::vector<double> draft_ms_;   // [sizes + 1] or empty
  std::vector<double> base_verify_ms_, base_draft_ms_;  // as measured
  double read_row_ms_ = 0, read_ahead_ms_ = 0;
  std::vector<double> product_ms_;  // [c] = ms of a product over c rows; empty: linear (SetReadRowMs)
  int32_t read_block_ = 1;
  ContextCost verify_context_, draft_context_;
};

// CostModel::Of(profile).CeilingSpeedup over the profile's measured sizes up to
// `max_n`: what no proposer graft verifies can beat on the machine it was measured on
// (`graft tune`, results.md). `max_n` is what it was priced at (the budget asked,
// capped at the largest size measured). `speedup` is 0 when there is none to give: no
// size measured, or rows read ahead without their measured product curve (profiles
// before version 7), whose ceiling would come out too low to be one.
struct Ceiling {
  double speedup = 0;
  int32_t rows = 1;   // the chain length that reaches it
  int32_t max_n = 0;  // the largest tree it was priced over
};
Ceiling ProfileCeiling(const CostProfile& profile, int32_t max_n);

// What a lazy pass reads after its root's row (CostModel::ReadsMs's arguments): the
// rows read alone or first of a product, and the products over c >= 2 rows ([c]).
struct ReadCounts {
  int64_t alone = 0;
  std::vector<int64_t> products;
};

// The reads of a verification that hinted `hinted` (ReadAheadNodes: the root, then a
// chain) in products of at most `read_block` rows and accepted the path `accepted`
// (root first), as Context computes them: the root's product always; a later one when
// the path reaches its first row; an accepted row outside those, alone. For the
// model-free replay. O(|hinted| x |accepted|).
ReadCounts CountReads(std::span<const int32_t> hinted, std::span<const int32_t> accepted, int32_t read_block);

// The nodes a verification reads ahead with its root's row (Context::HintReads), in
// order: the root, then down the likeliest child (by `a`, e.g. PathAcceptance) as many
// as CostModel::ReadAheadLength of that chain. Just the root when none is.
// `parent[i] < i`, the root's -1. O(n).
std::vector<int32_t> ReadAheadNodes(std::span<const int32_t> parent, std::span<const double> a, const CostModel& cost);

// How far one request may fall behind plain decoding (issue 9: never slower). Each
// step's tree is a bet: if only its root's token is accepted, its extra rows are time
// lost against a 1-row pass. The calibrated estimates are right on average over the
// pooled requests but not per request: after a 4-7 token match, answers that restate a
// phrase of the question went on with it for 1-3 tokens where summaries went on for 6-9,
// and the same cells priced both. So a request bets only what it can afford: a tree of
// n rows is allowed while its worst case keeps the request's modelled excess over plain
// decoding within
//   allowance * (plain time of the tokens emitted so far) + grant * (one 1-row pass)
//   + prefill_share * (the prompt's modelled prefill) * ramp(tokens emitted)
// (what the request has gained over plain decoding adds to it, what it lost comes off).
// Up to `prefill_after` tokens the ramp is 0, and a request of T tokens runs at
// >= 1 / (1 + allowance + grant / T) of plain decoding's modelled speed whatever its
// estimates say (at the defaults: >= 0.95 from T = 10 on), so a short answer cannot
// spend a speculation it never wins back. Past that it is not a short answer, and a
// long prompt gives it room to bet again after misses: on a 2-core Xeon a grant of 0.3
// passes alone left a long document's summary unable to try a second copy for ~15
// tokens after its first miss (0.97x modelled where a grant of 2 got 1.12x); the
// prefill's share keeps the end-to-end loss under about `prefill_share` more. A
// request that copies gains room with every accepted token and is not held back.
// Only the target's rows are capped: a drafted tree's draft passes are DraftGate's to
// decide, and are counted in the excess once spent. Deterministic (modelled costs).
// The defaults are DecodeOptions::max_loss, loss_grant and loss_prefill; these are "no bound".
struct LossBudgetOptions {
  double allowance = -1;  // < 0: no bound
  double grant = 0;       // in 1-row passes
  // Once the request has emitted `prefill_after` tokens it also earns `prefill_share` of
  // its prompt's modelled prefill (CostModel::PrefillMs), spread over the next
  // `prefill_over` tokens.
  double prefill_share = 0;
  int64_t prefill_after = 16;
  int64_t prefill_over = 32;
  // A sure bet may overdraw the room by up to `sure_cap` 1-row passes (0 = none): one
  // whose likeliest first token the calibration expects to miss with probability at
  // most `sure_miss`, from a cell that has seen at least `sure_trials` outcomes
  // (SureFirstAcceptance, graft/calibration.h). The worst case then adds one failed
  // sure bet's overdraft (the room cannot go below -sure_cap passes), in exchange for
  // not locking a request out of near-certain copies for tens of tokens after one
  // miss: on 16 code edits, replayed, a 2-row bet at 0.79 failed at token 12 and the
  // request then verified 1 row a step through 20 copies rated 0.97 (issue 9).
  double sure_miss = 0.1;
  double sure_cap = 0;
  double sure_trials = 4;
};

class LossBudget {
 public:
  // Starts a request with no excess. O(1).
  // `prefill_ms`: the prompt's modelled prefill (CostModel::PrefillMs).
  void Begin(const LossBudgetOptions& options, double prefill_ms = 0) {
    o_ = options;
    excess_ms_ = 0;
    plain_ms_ = 0;
    prefill_ms_ = prefill_ms;
    tokens_ = 0;
  }
  // The largest n in [1, max_n] such that a pass over any m <= n rows, with
  // `other_rows` more rows in it (BatchLoad), keeps the request within its budget even
  // if it emits one token: excess + VerifyMs(other_rows + m) - VerifyMs(other_rows + 1)
  // + WastedReadAheadMs(m) <= room (a lazy pass that reads rows ahead with its root's
  // wastes them when only the root's token is emitted). 1 when even 2 rows do not fit.
  // O(max_n).
  // `first_accept`: SureFirstAcceptance of the tree (a sure bet when
  // 1 - first_accept <= sure_miss): the room grows by sure_cap 1-row passes.
  int32_t MaxRows(const CostModel& cost, int32_t max_n, int32_t other_rows, double first_accept = 0) const;
  // A step ended: it cost `step_ms` (modelled: its draft passes and its pass), and
  // emitted `tokens` that plain decoding would have taken `plain_ms` each for. O(1).
  void Observe(double step_ms, double plain_ms, int32_t tokens) {
    excess_ms_ += step_ms - plain_ms * tokens;
    plain_ms_ += plain_ms * tokens;
    tokens_ += tokens;
  }
  // Modelled ms this request spent beyond plain decoding (negative: ahead of it).
  double excess_ms() const { return excess_ms_; }
  const LossBudgetOptions& options() const { return o_; }

 private:
  LossBudgetOptions o_;
  double excess_ms_ = 0;  // sum of step_ms - plain_ms * tokens
  double plain_ms_ = 0;   // sum of plain_ms * tokens
  double prefill_ms_ = 0;  // the prompt's modelled prefill
  int64_t tokens_ = 0;     // emitted so far
};

// Whether the draft model pays on this machine, decided per step between two arms:
// "draft" and "retrieval only". The retrieval arm is never slower than plain decoding
// (its tree shrinks to the root when nothing promises enough); the draft arm costs a
// draft pass per level, and the first time in a request its copy of the prompt.
//
// - Retrieval arm: its rate is measured, an exponential moving average of the tokens
//   per modelled ms of its steps (before any, 1 token per 1-row pass).
// - Draft arm: its rate is modelled, DraftRate() at the draft's per-level acceptance
//   alpha, a Beta posterior with an optimistic prior (mean `prior_accept`) whose
//   counts fade by `forget` per observed level, so it follows the text.
// - Draft arm, measured: once drafted steps have been seen, the arm's rate is also
//   an exponential moving average of their tokens per modelled ms (ObserveDrafted),
//   and the lower of the two counts: the chain model leaves out what a real step
//   adds (the rows of its catch-up, a tree wider than a chain), and on a 2-core Xeon
//   on 2026-12-04 a gate that trusted it drafted qa answers at 0.81x plain decoding
//   (modelled 0.82-0.84x).
// - Exploit: draft when the draft rate beats both the retrieval rate and plain
//   decoding's (1 / VerifyMs(1): a retrieval arm slower than that is no reason to
//   draft) and the time it saves over the request's remaining tokens covers the
//   draft's catch-up (its prompt prefill the first time). Explore: otherwise, once at
//   gate steps 32, 64, 128, ... (decaying), draft if an `max_accept` draft would pay by
//   the same test, the measured rate left out.
//
// So where even a draft accepted at `max_accept` per level cannot beat a 1-row pass
// (measured here: a 0.5B draft level costs 0.54 of a 1.5B target token and two
// target rows 1.47 of one), the draft is never run and its prompt never prefilled;
// where it pays (GPUs, cheap drafts) it runs from the first step. Deterministic:
// the same observations give the same decisions.
struct DraftGateOptions {
  double prior_accept = 0.8;  // prior mean of the per-level acceptance (a same-family draft on text it knows)
  double prior_levels = 4;    // the prior's strength, in observed levels
  double max_accept = 0.9;    // the best per-level acceptance exploration assumes
  double forget = 0.97;       // per observed level: the posterior's memory is ~33 levels
  double ema = 0.15;          // weight of a step in the retrieval and drafted arms' rates
  int64_t first_explore = 32; // first exploration step (then 64, 128, ...)
};

// A request that could draft this step but can do without (graft's adaptive policy
// with other requests in the pass): what its step is expected to yield either way.
// The draft's side is the gate's chain model (DraftGate::Plan); the other side is its
// retrieval-only tree, already built and sized.
struct DraftOffer {
  double tokens_with = 1, tokens_without = 1;  // expected tokens the step emits
  int32_t rows_with = 1, rows_without = 1;     // target rows of its tree
  int32_t passes = 1;      // draft passes: the catch-up, then one per further level
  int32_t catch_up = 1;    // rows of its catch-up pass
  int32_t level_rows = 1;  // rows of each later pass
};

// Modelled ms of the draft passes that every offer in `drafting` shares (the drafts
// of an EngineGroup run together): pass 0 holds every catch-up, pass j the level rows
// of those with more than j passes. O(|drafting| x passes).
double SharedDraftMs(const CostModel& cost, std::span<const DraftOffer> drafting);

// Which requests of one shared step draft (EngineGroup). `load`: the rest of the pass
// (prefill rows, the trees of requests that do not draft, and their tokens); `required`:
// requests that draft whatever is chosen (methods that always draft), their rows and
// passes counted, their tokens in `load`; `offers`: requests that may draft. Maximises
// the step's expected tokens per ms,
//   (load.tokens + each offer's tokens with or without) /
//   (SharedDraftMs(required + chosen) + VerifyMs(load.rows + required rows + each offer's rows)),
// over the offers taken best gain (tokens_with - tokens_without) first, so a draft pass
// that pays only when shared is taken for all, and none where drafting delays the
// other requests more than it gains. Returns chosen[i] for offers[i]. O(|offers|^2 x passes).
std::vector<bool> ChooseDrafts(const CostModel& cost, const BatchLoad& load, std::span<const DraftOffer> required,
                               std::span<const DraftOffer> offers);

class DraftGate {
 public:
  explicit DraftGate(const DraftGateOptions& options = {}) : o_(options), next_explore_(options.first_explore) {}

  // Decision for the next step. `max_depth`: deepest draft level; `level_rows`: draft
  // rows per level after the first; `catch_up`: committed tokens the draft's cache
  // lacks; `remaining`: tokens the request may still emit. O(max_depth).
  bool ShouldDraft(const CostModel& cost, int32_t max_depth, int32_t level_rows, int32_t catch_up,
                   int32_t remaining);
  // A drafted step's outcome: `levels` draft levels tested, `accepted` of them accepted. O(1).
  void ObserveDraft(int32_t levels, int32_t accepted);
  // A retrieval-only step: `tokens` emitted in `ms` (modelled). O(1).
  void ObserveRetrieval(int32_t tokens, double ms);
  // A drafted step: `tokens` emitted in `ms` (modelled: its draft passes, without a
  // prompt prefill, its target pass and its reads). O(1).
  void ObserveDrafted(int32_t tokens, double ms);

  // Posterior mean of the per-level acceptance.
  double Accept() const { return (o_.prior_accept * o_.prior_levels + accepted_) / (o_.prior_levels + levels_); }
  // Tokens per ms of the retrieval arm (1 / VerifyMs(1) before any observation).
  double RetrievalRate(const CostModel& cost) const {
    return retrieval_.seen > 0 ? retrieval_.rate : 1.0 / cost.VerifyMs(1);
  }
  // Tokens per ms of the drafted steps seen (EMA), or -1 before any.
  double DraftedRate() const { return drafted_.seen > 0 ? drafted_.rate : -1.0; }
  // Expected tokens per ms of a draft step whose levels are each accepted with
  // probability `alpha`, at its best depth d <= max_depth, with t = 1 + alpha + ... + alpha^d:
  //   t / (DraftMs(1) + (d - 1) DraftMs(level_rows) + VerifyMs(d + 1) + reads)
  // (a lazy pass reads the row of every accepted node: reads = the sum of ChainReadMs
  // over the chain alpha, alpha^2, ..., alpha^d).
  // O(max_depth).
  static double DraftRate(const CostModel& cost, double alpha, int32_t max_depth, int32_t level_rows);
  // DraftRate's best depth, the tokens it expects there (1 + alpha + ... + alpha^d)
  // and its rate (0 when max_depth < 1).
  struct Plan {
    int32_t depth = 0;
    double tokens = 1;
    double rate = 0;
  };
  static Plan BestPlan(const CostModel& cost, double alpha, int32_t max_depth, int32_t level_rows);
  // The per-level acceptance the last ShouldDraft that said yes assumed: Accept(), or
  // `max_accept` when it explored.
  double decision_accept() const { return decision_accept_; }

 private:
  bool Pays(const CostModel& cost, double alpha, int32_t max_depth, int32_t level_rows, int32_t catch_up,
            int32_t remaining, bool measured) const;

  DraftGateOptions o_;
  double levels_ = 0, accepted_ = 0;  // faded counts of observed draft levels
  // Tokens per modelled ms of observed steps: an EMA of weight `ema`, the first step's rate at first.
  struct StepRate {
    double rate = 0;
    int32_t seen = 0;  // steps observed
    void Add(int32_t tokens, double ms, double ema);
  };
  StepRate retrieval_;  // retrieval-only steps
  StepRate drafted_;    // drafted steps
  int64_t step_ = 0;
  int64_t next_explore_;
  double decision_accept_ = 0;
};

}  // namespace graft
