// Replays graft's retrieval-only step policy on recorded greedy outputs, without a
// model: `graft bench --save-outputs` stores each prompt's tokens and ar's output,
// and under greedy verification a proposed node is accepted exactly when its path
// spells the recorded output. So tau, rows per pass and the modelled speedup of a
// retrieval policy can be measured in milliseconds, for studying what the request
// index finds (issue 9, requirement 4). Not a substitute for `graft bench`: the
// next-token table (it needs the target's logits) and the draft model are left out.
//
//   replay_retrieval --profile ~/.cache/graft/profiles/X.json [--budget 16] results.json...
// --reliability groups the verified trees by the rated acceptance of their likeliest first
// token and shows how often one was accepted (is the calibration's rating honest?);
// --by-copy groups the steps by how far the true continuation could have been copied
// from the prompt and output so far, and shows what the retriever offered and what the
// policy kept; --fresh starts every prompt with a fresh engine (calibration, history);
// --trace ID prints every step of one prompt; --no-shadow learns from verified nodes
// only, not from the cut ones (graft/shadow.h); --perfect replaces the policy by one
// that knows the output: each step verifies the correct path of the retrieved trie to
// the depth that the cost profile rates fastest (no miss, no wasted row), the ceiling
// of any policy over these candidates on this profile. --max-loss, --loss-grant,
// --loss-prefill, --sure-miss and --sure-cap set the loss budget (LossBudget,
// src/engine/cost_model.h; --max-loss -1 = none).
// A profile timed at a second, longer prefix (version 3) prices every step at its
// context (ContextCost); --no-context keeps the policy's decisions at the profile's
// prefix, the price not. A lazy pass reads its likeliest rows ahead with the root's
// (Context::HintReads) as the engine does, when the profile times rows read ahead;
// --read-block N caps that block (1: every row read alone), and --size-reads-alone
// sizes the trees as if every row were read alone (as the engine did before 3706f64).
// A profile that timed products over each number of rows (version 7) prices each as
// timed; --linear-reads decides as if a product cost one row plus the mean price of
// each further row (as the engine did before version 7), priced as timed.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cost_model.h"
#include "graft/cost_profile.h"
#include "graft/backend.h"
#include "graft/calibration.h"
#include "graft/engine.h"
#include "graft/graft.h"
#include "graft/prune.h"
#include "graft/retrieval_suffix.h"
#include "graft/shadow.h"
#include "graft/tree.h"
#include "graft/verify.h"
#include "read_json.h"

namespace {

using graft::Token;
using nlohmann::json;

struct Totals {
  int64_t tokens = 0, passes = 0, rows = 0;
  double ms = 0, ar_ms = 0;
};

// Steps grouped by how far the true continuation could be copied from the request
// (`--by-copy`): what the policy made of each kind of step.
constexpr int kCopyBins = 6;  // copyable prefix 0, 1, 2-3, 4-7, 8-15, 16
int CopyBin(int32_t l) { return l == 0 ? 0 : l == 1 ? 1 : l < 4 ? 2 : l < 8 ? 3 : l < 16 ? 4 : 5; }
struct CopyStats {
  int64_t steps[kCopyBins] = {}, accepted[kCopyBins] = {}, rows[kCopyBins] = {}, copyable[kCopyBins] = {};
  int64_t in_trie[kCopyBins] = {};  // the longest correct path the retriever offered
  double expected[kCopyBins] = {};  // what the policy expected its tree to get accepted
};

// Verified trees (more than the root) grouped by the rated acceptance of their likeliest
// first token (`--reliability`): how often a first token was accepted at each rating.
struct Reliability {
  int64_t steps[10] = {}, hits[10] = {}, rows[10] = {}, accepted[10] = {};
  double rated[10] = {}, expected[10] = {};
};

// How many tokens of out[i..] the trie spells from its implicit root.
int32_t CorrectDepth(const graft::CandidateTrie& trie, const std::vector<Token>& out, size_t i) {
  int32_t node = -1, depth = 0;
  for (bool found = true; found && i + depth < out.size();) {
    found = false;
    for (int32_t k = 0; k < trie.size(); ++k) {
      if (trie.parent[k] == node && trie.token[k] == out[i + depth]) {
        node = k, ++depth, found = true;
        break;
      }
    }
  }
  return depth;
}

// The longest prefix (at most 16) of out[i..] that occurs anywhere in `text`. O(|text| * 16).
int32_t CopyablePrefix(const std::vector<Token>& text, const std::vector<Token>& out, size_t i) {
  const size_t want = std::min<size_t>(16, out.size() - i);
  int32_t best = 0;
  for (size_t s = 0; s < text.size() && static_cast<size_t>(best) < want; ++s) {
    size_t l = 0;
    while (l < want && s + l < text.size() && text[s + l] == out[i + l]) ++l;
    best = std::max<int32_t>(best, static_cast<int32_t>(l));
  }
  return best;
}

struct Replayer {
  graft::CostModel cost;   // the policy's: at each step's context unless --no-context
  graft::CostModel price;  // what each pass costs: always at its step's context
  graft::CostModel sizing;  // `cost`, or --size-reads-alone: `cost` with every row read alone
  bool context_decisions = true;
  int32_t budget = 16;
  bool fixed = false;  // keep every grafted node (no cost-based size)
  graft::Calibration calibration;
  graft::RetrievalOptions retrieval;
  graft::HistoryIndex history{graft::HistoryOptions{}};
  CopyStats* copy = nullptr;  // --by-copy
  Reliability* reliability = nullptr;  // --reliability
  bool trace = false;          // print every step of this prompt
  bool perfect = false;        // --perfect: the policy knows the output
  bool shadow_on = true;       // learn from the candidates cut from each tree (--no-shadow: not)
  graft::ShadowTrials shadow;
  const std::vector<Token>* out_ = nullptr;  // this turn's recorded output, at out_pos_
  size_t out_pos_ = 0;
  graft::CandidateTrie trie_;  // the last step's retrieved candidates
  graft::LossBudgetOptions loss_options;  // the engine's DecodeOptions::max_loss, loss_grant
  graft::LossBudget loss;

  // One turn: prompt, then the recorded output, step by step.
  // `n_predict`: the run's cap on new tokens. An output that reached it was cut there,
  // and the engine never grows a node deeper than the tokens left before the cap.
  void Turn(const std::vector<Token>& prompt, const std::vector<Token>& out, int32_t n_predict, Totals* t) {
    graft::RequestRetriever request(retrieval, &history);
    request.Reset(prompt);
    calibration.BeginRequest();
    shadow.Clear();
    loss.Begin(loss_options, cost.PrefillMs(static_cast<int64_t>(prompt.size())));
    std::vector<Token> committed = prompt;
    size_t i = 0;
    while (i < out.size()) {
      graft::TokenTree tree;
      tree.Reset(committed.back());
      const int32_t left = n_predict - static_cast<int32_t>(i);
      out_ = &out;
      out_pos_ = i;
      price.SetContext(static_cast<int32_t>(committed.size()));
      if (context_decisions) cost.SetContext(static_cast<int32_t>(committed.size()));
      if (context_decisions) sizing.SetContext(static_cast<int32_t>(committed.size()));
      Propose(committed, &request, left > 0 ? left - 1 : 1 << 30, &tree);
      // The kept nodes' calibrated path acceptance, before this step's outcome is learnt.
      const std::vector<double> rated = graft::PathAcceptance(tree, calibration);
      double expected = -1.0;  // their sum, the root's 1 left out
      for (const double a : rated) expected += a;
      const graft::VerifyResult vr = graft::VerifyGreedy(
          tree, [&](int32_t node) { return i + tree.depth[node] < out.size() ? out[i + tree.depth[node]] : -2; });
      graft::RecordOutcome(tree, vr, &calibration);
      std::vector<Token> emitted = vr.CommittedTokens(tree);
      if (emitted.back() == -2) emitted.pop_back();  // past the recorded end
      if (trace) {  // each node as parent:confidence(calibrated path acceptance, as the policy saw it)
        const std::vector<double>& a = rated;
        std::printf("  step at %zu: rows %d accepted %zu copyable %d in-trie %d (trie %d) |", i, tree.size(), emitted.size() - 1,
                    CopyablePrefix(committed, out, i), CorrectDepth(trie_, out, i), trie_.size());
        for (int32_t k = 1; k < tree.size(); ++k) std::printf(" %d:%.2f(%.2f)", tree.parent[k], tree.prob[k], a[k]);
        if (tree.size() == 1) {
          std::printf(" trie:");
          for (int32_t k = 0; k < std::min(trie_.size(), 6); ++k)
            std::printf(" %d:%.2f[%.2f]", trie_.parent[k], trie_.prob[k], calibration.Estimate(graft::Source::kRequest, trie_.prob[k], 1));
        }
        std::printf("\n");
      }
      if (reliability != nullptr && tree.size() > 1) {  // the likeliest first token: rated vs accepted
        const double best = graft::SureFirstAcceptance(tree, rated, calibration, 0);
        const int b = std::min(9, static_cast<int>(best * 10));
        reliability->steps[b] += 1;
        reliability->rated[b] += best;
        reliability->hits[b] += vr.num_accepted_proposals() > 0;
        reliability->rows[b] += tree.size();
        reliability->accepted[b] += vr.num_accepted_proposals();
        reliability->expected[b] += expected;
      }
      if (copy != nullptr) {
        const int32_t l = CopyablePrefix(committed, out, i);
        const int b = CopyBin(l);
        copy->steps[b] += 1;
        copy->accepted[b] += static_cast<int64_t>(emitted.size()) - 1;
        copy->rows[b] += tree.size();
        copy->copyable[b] += l;
        copy->in_trie[b] += CorrectDepth(trie_, out, i);
        copy->expected[b] += expected;
      }
      t->tokens += static_cast<int64_t>(emitted.size());
      t->passes += 1;
      t->rows += tree.size();
      // A lazy pass reads the rows of the accepted path, and those the engine hinted
      // with the root's (ReadAheadNodes, by the same ratings).
      const std::vector<int32_t> ahead = graft::ReadAheadNodes(tree.parent, rated, cost);
      const graft::ReadCounts reads = graft::CountReads(ahead, vr.accepted, cost.read_block());
      t->ms += price.VerifyMs(tree.size()) + price.ReadsMs(reads.alone, reads.products);
      loss.Observe(cost.VerifyMs(tree.size()) + cost.ReadsMs(reads.alone, reads.products), cost.VerifyMs(1),
                   static_cast<int32_t>(emitted.size()));
      t->ar_ms += price.VerifyMs(1) * static_cast<double>(emitted.size());
      if (shadow_on) shadow.Commit(emitted, &calibration);
      request.Append(emitted);
      committed.insert(committed.end(), emitted.begin(), emitted.end());
      i += emitted.size();
    }
    history.AddOutput(out);
  }

  void KeepCorrectPath(int32_t max_depth, graft::TokenTree* tree) const;

  // GraftProposer's retrieval-only path: the request index (merged with the history)
  // under the root, grafted by calibrated acceptance, then the best size by cost.
  void Propose(const std::vector<Token>& committed, graft::RequestRetriever* request, int32_t max_depth,
               graft::TokenTree* tree) {
    graft::CandidateTrie& trie = trie_;
    const size_t from = committed.size() > 64 ? committed.size() - 64 : 0;
    request->Query(graft::TokenSpan(committed).subspan(from), budget - 1, &trie);
    if (trie.empty()) return;
    if (perfect) {
      KeepCorrectPath(std::min({budget - 1, 16, max_depth}), tree);
      return;
    }
    graft::GraftOptions go;
    go.min_accept_prob = 0.05f;
    go.max_depth = std::min(16, max_depth);
    graft::Graft(tree, 0, trie, graft::Source::kRequest, budget, calibration, go);
    if (tree->size() <= 1 || fixed) return;
    const std::vector<double> acc = graft::PathAcceptance(*tree, calibration);
    std::vector<double> sorted(acc.begin() + 1, acc.end());
    std::stable_sort(sorted.begin(), sorted.end(), std::greater<>());
    const double sure = graft::SureFirstAcceptance(*tree, acc, calibration, loss_options.sure_trials);
    const int32_t n_best = sizing.BestSize(sorted, 0, loss.MaxRows(cost, budget, 0, sure));
    if (n_best >= tree->size()) return;
    graft::PruneOptions keep;
    keep.min_accept_prob = 0.0f;
    keep.max_depth = 1 << 30;
    keep.max_nodes = n_best;
    std::vector<int32_t> kept;
    graft::TokenTree pruned = graft::Prune(*tree, keep, calibration, &kept);
    if (shadow_on) shadow.Add(std::move(*tree), kept);
    *tree = std::move(pruned);
  }
};

// --perfect: the trie's path that spells the recorded output, cut to the depth with the
// most tokens per modelled ms (a pass over d + 1 rows yields d + 1 tokens).
void Replayer::KeepCorrectPath(int32_t max_depth, graft::TokenTree* tree) const {
  const int32_t correct = std::min(CorrectDepth(trie_, *out_, out_pos_), max_depth);
  int32_t keep = 0;
  double best = 1.0 / cost.VerifyMs(1), read_ms = 0;
  const std::vector<double> sure(std::max(0, correct), 1.0);  // the path it keeps is accepted
  const int32_t ahead = sizing.ReadAheadLength(sure);
  for (int32_t d = 1; d <= correct; ++d) {
    read_ms += sizing.ChainReadMs(sure, d - 1, ahead);
    const double rate = (d + 1) / (cost.VerifyMs(d + 1) + read_ms);
    if (rate > best) best = rate, keep = d;
  }
  int32_t node = -1, at = 0;
  for (int32_t d = 0; d < keep; ++d) {
    int32_t next = 0;
    while (trie_.parent[next] != node || trie_.token[next] != (*out_)[out_pos_ + d]) ++next;
    node = next;
    at = tree->Add(at, trie_.token[node], trie_.prob[node], graft::Source::kRequest);
  }
}


using graft_bench::ReadJson;

}  // namespace

int Run(int argc, char** argv) {
  std::string profile;
  int32_t budget = 16;
  bool fixed = false;
  double scale_prior = 0.5;  // the engine's CalibrationOptions::source_scale_prior
  float alpha = 1.0f;        // RetrievalOptions::confidence_alpha
  double explore = 2.0;      // CalibrationOptions::explore_strength (the engine's)
  double request_strength = 8;  // CalibrationOptions::request_strength (the engine's)
  bool by_copy = false;
  bool by_rating = false;
  bool cap_outputs = true;  // --no-cap: ignore the run's n_predict (as before 2026-12-02)
  bool fresh = false;  // every prompt starts with a fresh calibration and history
  bool perfect = false;
  // The engine's defaults (--max-loss -1: no bound, as before 2026-12-03).
  graft::LossBudgetOptions loss{.allowance = graft::DecodeOptions{}.max_loss,
                                .grant = graft::DecodeOptions{}.loss_grant,
                                .prefill_share = graft::DecodeOptions{}.loss_prefill,
                                .sure_cap = graft::DecodeOptions{}.loss_sure_cap};
  bool context = true;  // the policy prices passes at their context (--no-context: at the profile's prefix)
  bool shadow = true;  // ShadowTrials, as the engine (--no-shadow: verified nodes only, as before 2026-12-02)
  std::string trace;  // a prompt id whose steps are printed
  int32_t read_block = graft::Context::kMaxReadBlock;  // rows one product may read, the root's included
  bool size_reads_alone = false;                       // size trees as if every row were read alone
  bool linear_reads = false;                           // decide as if products cost linearly in their rows
  std::vector<std::string> files;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--profile" && a + 1 < argc) profile = argv[++a];
    else if (arg == "--budget" && a + 1 < argc) budget = std::stoi(argv[++a]);
    else if (arg == "--fixed") fixed = true;
    else if (arg == "--scale-prior" && a + 1 < argc) scale_prior = std::stod(argv[++a]);
    else if (arg == "--alpha" && a + 1 < argc) alpha = std::stof(argv[++a]);
    else if (arg == "--explore" && a + 1 < argc) explore = std::stod(argv[++a]);
    else if (arg == "--request-strength" && a + 1 < argc) request_strength = std::stod(argv[++a]);
    else if (arg == "--by-copy") by_copy = true;
    else if (arg == "--reliability") by_rating = true;
    else if (arg == "--no-cap") cap_outputs = false;
    else if (arg == "--fresh") fresh = true;
    else if (arg == "--perfect") perfect = true;
    else if (arg == "--no-shadow") shadow = false;
    else if (arg == "--no-context") context = false;
    else if (arg == "--max-loss" && a + 1 < argc) loss.allowance = std::stod(argv[++a]);
    else if (arg == "--loss-grant" && a + 1 < argc) loss.grant = std::stod(argv[++a]);
    else if (arg == "--loss-prefill" && a + 1 < argc) loss.prefill_share = std::stod(argv[++a]);
    else if (arg == "--sure-miss" && a + 1 < argc) loss.sure_miss = std::stod(argv[++a]);
    else if (arg == "--sure-cap" && a + 1 < argc) loss.sure_cap = std::stod(argv[++a]);
    else if (arg == "--sure-trials" && a + 1 < argc) loss.sure_trials = std::stod(argv[++a]);
    else if (arg == "--trace" && a + 1 < argc) trace = argv[++a];
    else if (arg == "--read-block" && a + 1 < argc) read_block = std::stoi(argv[++a]);
    else if (arg == "--size-reads-alone") size_reads_alone = true;
    else if (arg == "--linear-reads") linear_reads = true;
    else files.push_back(arg);
  }
  if (profile.empty() || files.empty() || budget < 1 || budget > 256) {
    std::fprintf(stderr, "usage: replay_retrieval --profile PROFILE.json [--budget N] [--fixed] [--scale-prior X] [--alpha X] [--explore X] [--request-strength X] [--by-copy] [--reliability] [--fresh] [--no-cap] [--perfect] [--no-shadow] [--no-context] [--max-loss X] [--loss-grant X] [--loss-prefill X] [--sure-miss X] [--sure-cap X] [--trace PROMPT_ID] [--read-block N] [--size-reads-alone] [--linear-reads] results.json...\n");
    return 2;
  }
  // Every recording is read and checked before any work: replaying needs the tokens
  // that only `graft bench --save-outputs` keeps (without it prompt_tokens is a count).
  std::vector<json> runs;
  for (const std::string& f : files) {
    runs.push_back(ReadJson(f));
    const json& rj = runs.back();
    bool saved = false;
    if (rj.contains("rows") && rj["rows"].is_array()) {
      for (const json& row : rj["rows"]) {
        saved = saved || (graft_bench::HasSavedTokens(row) && row.value("config", "") == "ar");
      }
    }
    if (!saved) throw std::runtime_error(f + ": no saved outputs of ar (rerun `graft bench` with --save-outputs)");
  }
  json pj = ReadJson(profile);
  // The profile's curves, and its long-prefix curve when it has one (draft passes are not replayed).
  const graft::CostProfile cost_profile = graft::CostProfileFromJson(pj);
  graft::CostModel costs = graft::CostModel::Of(cost_profile);
  if (read_block < 1) throw std::runtime_error("--read-block must be at least 1");
  // As the engine (EngineState::Costs): rows read ahead when the profile timed them.
  if (cost_profile.read_ahead_ms > 0) costs.SetReadBlock(std::min(read_block, graft::Context::kMaxReadBlock));
  graft::CostModel policy = costs;
  if (linear_reads) {  // as before profile version 7: one row, then each row ahead at the mean price
    policy.SetReadRowMs(cost_profile.read_row_ms, cost_profile.read_ahead_ms);
    policy.SetReadBlock(costs.read_block());
  }
  graft::CostModel sizing = policy;
  if (size_reads_alone) sizing.SetReadBlock(1);
  Replayer r{policy, costs, sizing, context, budget, fixed,
              graft::Calibration(graft::CalibrationOptions{.source_scale_prior = scale_prior, .explore_strength = explore,
                                                       .request_strength = request_strength})};
  r.retrieval.confidence_alpha = alpha;
  CopyStats copy;
  if (by_copy) r.copy = &copy;
  Reliability rel;
  if (by_rating) r.reliability = &rel;
  r.perfect = perfect;
  r.shadow_on = shadow;
  r.loss_options = loss;
  std::printf("%-28s %6s %6s %6s %8s\n", "prompt", "tokens", "tau", "rows", "speedup");
  Totals all;
  for (const json& rj : runs) {
    // Recordings of older runs lack the flag: then no output counts as cut.
    const int32_t n_predict = cap_outputs && rj.contains("flags") && rj["flags"].contains("n_predict")
                                  ? rj["flags"]["n_predict"].get<int32_t>()
                                  : 0;
    for (const json& row : rj.at("rows")) {
      if (row.at("config") != "ar" || !row.contains("prompt_tokens") || !row["prompt_tokens"].is_array()) continue;
      Totals t;
      if (fresh) {
        r.calibration.Clear();
        r.history.Clear();
      }
      r.trace = row.at("prompt_id").get<std::string>() == trace;
      const auto prompts = row.at("prompt_tokens").get<std::vector<std::vector<Token>>>();
      const auto outs = row.at("output_tokens").get<std::vector<std::vector<Token>>>();
      for (size_t k = 0; k < prompts.size() && k < outs.size(); ++k) r.Turn(prompts[k], outs[k], n_predict, &t);
      std::printf("%-28s %6lld %6.2f %6.1f %7.2fx\n",
                  (row.at("category").get<std::string>() + "/" + row.at("prompt_id").get<std::string>()).c_str(),
                  static_cast<long long>(t.tokens), double(t.tokens) / t.passes, double(t.rows) / t.passes,
                  t.ar_ms / t.ms);
      all.tokens += t.tokens, all.passes += t.passes, all.rows += t.rows, all.ms += t.ms, all.ar_ms += t.ar_ms;
    }
  }
  std::printf("%-28s %6lld %6.2f %6.1f %7.2fx\n", "all", static_cast<long long>(all.tokens),
              double(all.tokens) / all.passes, double(all.rows) / all.passes, all.ar_ms / all.ms);
  if (by_copy) {
    static const char* kBin[kCopyBins] = {"0", "1", "2-3", "4-7", "8-15", "16"};
    std::printf("\n%-10s %6s %9s %9s %9s %9s %6s\n", "copyable", "steps", "copyable", "in trie", "expected", "accepted",
                "rows");
    for (int b = 0; b < kCopyBins; ++b) {
      const double n = std::max<int64_t>(copy.steps[b], 1);
      std::printf("%-10s %6lld %9.2f %9.2f %9.2f %9.2f %6.2f\n", kBin[b], static_cast<long long>(copy.steps[b]),
                  copy.copyable[b] / n, copy.in_trie[b] / n, copy.expected[b] / n, copy.accepted[b] / n,
                  copy.rows[b] / n);
    }
  }
  if (by_rating) {
    std::printf("\n%-10s %6s %9s %9s %6s %9s %9s\n", "rated", "trees", "rated", "accepted", "rows", "expected",
                "got");
    for (int b = 0; b < 10; ++b) {
      const double n = std::max<int64_t>(rel.steps[b], 1);
      std::printf("%.1f-%.1f    %6lld %9.2f %9.2f %6.2f %9.2f %9.2f\n", b / 10.0, (b + 1) / 10.0,
                  static_cast<long long>(rel.steps[b]), rel.rated[b] / n, rel.hits[b] / n, rel.rows[b] / n,
                  rel.expected[b] / n, rel.accepted[b] / n);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replay_retrieval: %s\n", e.what());
    return 1;
  }
}
