// How close to a tie the target was where a method's greedy output parts from ar's
// (issue 9: "every divergence from ar at a measured near-tie, counted"). Speculative
// verification evaluates a position in a pass over several rows, and llama.cpp's
// kernels round such a pass differently from ar's pass over one row, so where the
// target's two best tokens are within rounding of each other the outputs may part.
// Anywhere else they must not: a divergence at a clear margin is a bug.
//
// For every row of `graft bench --save-outputs` results whose output differs from ar's
// for the same prompt and repetition, this replays ar on the target: the turn's prompt
// prefilled in chunks as the engine does, then ar's output one 1-row pass per token, up
// to the first token that differs. There it reads the logits, as ar's own pass computed
// them, of ar's token and of the other method's, and counts the divergence as a
// near-tie, as the engine's losslessness tests do, when that lead is below twice the
// largest difference, over the vocabulary, between those logits and the same
// position's as the root of a 16-row pass (a chain of ar's next tokens, as a
// verification computes it): only then can the batch shape alone turn the two over.
// --tie X judges by a fixed margin of X logits instead. The lead in the 16-row pass is
// printed too. A replay that does not reproduce ar's tokens up to there (a run
// recorded on another machine or build) is flagged, and its margins still printed.
//
// Sampled rows (temperature > 0, issue 47): every method draws the token at output
// position k as ar does, by inverse CDF in token-id order at a uniform u keyed by the
// row's seed, the turn and k (graft/sampling.h PositionSampler), so they part only where the batch
// shape moves an end of ar's token's interval past u. The margin is then u's distance,
// in probability, to the nearer end of that interval in ar's distribution, and it is a
// near-tie when below how far logits the measured difference apart can move that end
// (the nucleus's edge included); "16 rows" is the same distance in the 16-row pass,
// negative where that pass draws another token. --tie X stands for a difference of X / 2.
// The summary also counts, per temperature, the rows compared with ar and those
// identical to it.
//
//   tie_margins [-m TARGET.gguf] [--tie LOGITS] [-t THREADS] results.json...
//
// Exit status: 0 when every divergence is at a near-tie, 1 when one is not, 2 on bad
// input (a message names the file).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "graft/backend.h"
#include "graft/error.h"
#include "graft/sampling.h"
#include "graft/tree.h"
#include "read_json.h"

namespace {

using graft::Token;
using nlohmann::json;

using graft_bench::ReadJson;

using Turns = std::vector<std::vector<Token>>;

// A saved row's prompt and output tokens, per turn; false when the row kept none
// (a run without --save-outputs, or a peer's row).
bool SavedTurns(const json& row, Turns* prompts, Turns* outputs) {
  if (!graft_bench::HasSavedTokens(row)) return false;
  *prompts = row["prompt_tokens"].get<Turns>();
  *outputs = row["output_tokens"].get<Turns>();
  if (prompts->size() != outputs->size()) throw std::runtime_error("prompt and output turns differ in number");
  return true;
}

// Where u = PositionSampler(sp).Uniform(position) falls in the inverse CDF (token-id
// order) of sp's distribution over `logits`: `margin` is its distance, in probability,
// to the nearer inner end of `token`'s interval (negative when outside it), `allowed`
// how far logits up to `diff` apart can move those ends: c goes within
// [c e^-a / (c e^-a + 1 - c), c e^a / (c e^a + 1 - c)], a = 2 diff / T, and a token at the
// top-p or top-k edge that may be in or out moves them by its mass. O(V log V).
struct SampleMargin {
  double margin = 0, allowed = 0;
};
SampleMargin SampleMarginOf(const float* logits, int32_t n_vocab, const graft::SamplingParams& sp, int64_t position,
                            Token token, double diff) {
  const graft::Distribution d = graft::MakeDistribution(logits, n_vocab, sp);
  std::vector<std::pair<Token, double>> by_id;
  double total = 0;
  for (int32_t i = 0; i < d.size(); ++i) by_id.emplace_back(d.token[i], d.prob[i]), total += d.prob[i];
  std::sort(by_id.begin(), by_id.end());
  const double u = graft::PositionSampler(sp).Uniform(position);
  const double a = std::min(2.0 * diff / sp.temperature, 700.0);  // e^a stays finite
  const auto moved = [a](double c) {
    const double hi = c * std::exp(a), lo = c * std::exp(-a);
    return std::max(hi / (hi + 1 - c) - c, c - lo / (lo + 1 - c));
  };
  SampleMargin m;
  m.margin = -1;
  double lo = 0;
  for (size_t i = 0; i < by_id.size(); ++i) {
    const double hi = lo + by_id[i].second / total;
    if (by_id[i].first == token) {
      const bool first = i == 0, last = i + 1 == by_id.size();
      const double inside = std::min(first ? 1.0 : u - lo, last ? 1.0 : hi - u);
      m.margin = u >= lo && u < hi ? inside : -std::min(std::fabs(u - lo), std::fabs(u - hi));
      m.allowed = std::max(first ? 0.0 : moved(lo), last ? 0.0 : moved(hi));
    }
    lo = hi;
  }
  // The edge of the top-k / top-p cut, by logit: the last token kept and the first left out.
  if (sp.top_k > 0 || sp.top_p < 1.0f) {
    std::vector<int32_t> order(static_cast<size_t>(n_vocab));
    for (int32_t v = 0; v < n_vocab; ++v) order[static_cast<size_t>(v)] = v;
    std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      return logits[x] > logits[y] || (logits[x] == logits[y] && x < y);
    });
    const size_t keep = static_cast<size_t>(d.size());
    if (keep < order.size()) {
      const float l_in = logits[order[keep - 1]], l_out = logits[order[keep]];
      bool edge = sp.top_k > 0 && static_cast<int32_t>(keep) == sp.top_k && l_in - l_out < 2 * diff;
      if (sp.top_p < 1.0f) {
        double w_total = 0, cum_in = 0;
        for (int32_t v = 0; v < n_vocab; ++v) {
          if (std::isfinite(logits[v])) w_total += std::exp((logits[v] - logits[order[0]]) / sp.temperature);
        }
        for (size_t i = 0; i < keep; ++i) cum_in += std::exp((logits[order[i]] - logits[order[0]]) / sp.temperature);
        const double w_in = std::exp((l_in - logits[order[0]]) / sp.temperature);
        const double c1 = cum_in / w_total, c0 = (cum_in - w_in) / w_total;
        edge = edge || std::fabs(c1 - sp.top_p) <= moved(c1) || (keep >= 2 && std::fabs(c0 - sp.top_p) <= moved(c0));
      }
      if (edge) {
        const double w_in = std::exp((l_in - logits[order[0]]) / sp.temperature);
        const double w_out = std::exp((l_out - logits[order[0]]) / sp.temperature);
        double kept = 0;
        for (size_t i = 0; i < keep; ++i) kept += std::exp((logits[order[i]] - logits[order[0]]) / sp.temperature);
        m.allowed += std::max(w_in, w_out) / kept;
      }
    }
  }
  return m;
}

struct Margin {
  float ar_logit = 0, other_logit = 0;
  float batched = 0;         // ar's token's lead in a pass over 16 rows: the root, then ar's next tokens
  float diff = 0;            // the largest |logit difference| between the two passes, over the vocabulary
  int32_t rank = 0;          // of the other method's token in ar's logits (0 = first)
  bool reproduced = true;    // the replay's argmax (sampled: its draw) was ar's token at every position
  // Sampled rows: in probability (SampleMarginOf), the 1-row pass's and the 16-row pass's.
  SampleMargin sample, sample_batched;
};

// ar's logits at position k of `out` after `prompt`, as ar computes them. Every token
// must be in the target's vocabulary (the caller checks).
// `sp`: the row's sampling (null: greedy); its draws at the turn's output positions.
// `tie` > 0: judge by a difference of tie / 2 instead of the measured one.
Margin MarginAt(graft::Context& ctx, const std::vector<Token>& prompt, const std::vector<Token>& out, size_t k,
                Token other, const graft::SamplingParams* sp, double tie) {
  const int32_t n_vocab = ctx.model().n_vocab();
  if (static_cast<int64_t>(prompt.size() + k) + 1 > ctx.n_ctx()) {
    throw std::runtime_error("prompt and output of " + std::to_string(prompt.size() + k) +
                             " tokens do not fit the context (-c)");
  }
  ctx.Truncate(0);
  const graft::TokenSpan head = graft::TokenSpan(prompt).first(prompt.size() - 1);
  for (size_t at = 0; at < head.size(); at += ctx.n_batch()) {  // the engine's prefill chunks
    ctx.Prefill(head.subspan(at, std::min<size_t>(ctx.n_batch(), head.size() - at)), false);
  }
  Margin m;
  graft::TokenTree tree;
  Token next = prompt.back();
  for (size_t i = 0;; ++i) {
    tree.Reset(next);
    ctx.EvalTree(tree);
    const float* logits = ctx.Logits(0);
    const auto drawn = [&](const float* l, size_t at) {
      return sp ? graft::PositionSampler(*sp).Sample(graft::MakeDistribution(l, n_vocab, *sp), static_cast<int64_t>(at))
                : graft::Argmax(l, n_vocab);
    };
    if (i == k) {
      m.ar_logit = logits[out[k]];
      m.other_logit = logits[other];
      for (int32_t v = 0; v < n_vocab; ++v) m.rank += logits[v] > m.other_logit;
      m.reproduced = m.reproduced && drawn(logits, k) == out[k];
      const std::vector<float> alone(logits, logits + n_vocab);
      // The same position as the root of a 16-row pass (a chain of ar's next tokens, as
      // many as the context holds), as a verification computes it: how far the batch
      // shape alone moves the lead.
      const int32_t rows = static_cast<int32_t>(std::min<int64_t>(16, ctx.n_ctx() - ctx.n_past()));
      for (size_t j = k; tree.size() < rows; j = j + 1 < out.size() ? j + 1 : k) {
        tree.Add(tree.size() - 1, out[j], 1.0f, graft::Source::kOracle);
      }
      ctx.CommitPath({0});  // then dropped again: the 16-row pass takes the root's place
      ctx.Truncate(ctx.n_past() - 1);
      ctx.EvalTree(tree);
      const float* batched = ctx.Logits(0);
      m.batched = batched[out[k]] - batched[other];
      for (int32_t v = 0; v < n_vocab; ++v) m.diff = std::max(m.diff, std::fabs(batched[v] - alone[v]));
      if (sp) {
        const double diff = tie > 0 ? tie / 2 : m.diff;
        m.sample = SampleMarginOf(alone.data(), n_vocab, *sp, static_cast<int64_t>(k), out[k], diff);
        m.sample_batched = SampleMarginOf(batched, n_vocab, *sp, static_cast<int64_t>(k), out[k], diff);
      }
      return m;
    }
    m.reproduced = m.reproduced && drawn(logits, i) == out[i];
    ctx.CommitPath({0});
    next = out[i];
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  double tie = 0;  // 0: twice the measured batched difference
  int32_t threads = 2;
  std::vector<std::string> files;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "-m" && a + 1 < argc) model_path = argv[++a];
    else if (arg == "--tie" && a + 1 < argc) tie = std::atof(argv[++a]);
    else if (arg == "-t" && a + 1 < argc) threads = std::atoi(argv[++a]);
    else if (!arg.empty() && arg[0] == '-') files.clear(), files.push_back(""), a = argc;  // usage
    else files.push_back(arg);
  }
  if (files.empty() || files[0].empty() || !(tie >= 0) || threads < 1) {
    std::fprintf(stderr, "usage: tie_margins [-m TARGET.gguf] [--tie LOGITS] [-t THREADS] results.json...\n");
    return 2;
  }
  try {
    std::unique_ptr<graft::Model> model;
    std::unique_ptr<graft::Context> ctx;
    int64_t divergences = 0, ties = 0, unreproduced = 0, shifted = 0;
    std::map<double, std::pair<int64_t, int64_t>> identical;  // by temperature: rows compared, identical to ar's
    bool any_sampled = false;
    double widest = 0;
    std::printf("%-28s %-14s %4s %5s  %-16s %-16s %8s %5s %8s %8s %s\n", "prompt", "config", "turn", "at",
                "ar's token", "its token", "margin", "rank", "16 rows", "2 x diff", "near-tie");
    for (const std::string& file : files) {
      const json results = ReadJson(file);
      if (!results.contains("rows") || !results["rows"].is_array()) throw std::runtime_error(file + ": no rows");
      // ar's saved turns per (prompt, repetition).
      std::map<std::tuple<std::string, int, double>, std::pair<Turns, Turns>> ar;  // by (prompt, rep, temperature)
      bool saved = false;
      for (const json& row : results["rows"]) {
        Turns p, o;
        if (row.value("config", "") != "ar" || !SavedTurns(row, &p, &o)) continue;
        ar[{row.at("prompt_id").get<std::string>(), row.value("rep", 0), row.value("temperature", 0.0)}] = {
            std::move(p), std::move(o)};
        saved = true;
      }
      if (!saved) throw std::runtime_error(file + ": no saved outputs of ar (run graft bench with --save-outputs)");
      if (!model) {
        std::string path = model_path;
        if (path.empty()) path = results.at("models").at("target").at("path").get<std::string>();
        model = graft::Model::Load(path);
        graft::ContextOptions co;
        co.n_ctx = results.contains("flags") ? results["flags"].value("ctx", 4096) : 4096;
        co.n_threads = threads;
        co.max_tree = 16;
        co.n_seq_max = 16;
        co.lazy_logits = results.contains("flags") && results["flags"].value("lazy_logits", false);
        ctx = std::make_unique<graft::Context>(*model, co);
      }
      std::map<std::tuple<double, std::string, int, size_t, size_t, Token>, Margin> seen;  // one replay per divergence
      const json flags = results.value("flags", json::object());
      for (const json& row : results["rows"]) {
        Turns prompts, outputs;
        const std::string config = row.value("config", "");
        if (config == "ar" || !SavedTurns(row, &prompts, &outputs)) continue;
        const std::string id = row.at("prompt_id").get<std::string>();
        // Sampled rows are compared with ar's row of the same temperature (and seed).
        const double temp = row.value("temperature", 0.0);
        const auto it = ar.find({id, row.value("rep", 0), temp});
        if (it == ar.end()) continue;
        const auto& [ar_prompts, ar_outputs] = it->second;
        std::optional<graft::SamplingParams> sp;
        if (temp > 0) {
          if (!row.contains("seed")) {
            throw std::runtime_error(file + ": a sampled row without its seed (results from before issue 47)");
          }
          any_sampled = true;
          sp = graft::SamplingParams{.temperature = static_cast<float>(temp), .top_k = flags.value("top_k", 0),
                                     .top_p = flags.value("top_p", 1.0f), .seed = row["seed"].get<uint64_t>()};
        }
        ++identical[temp].first;
        identical[temp].second += prompts == ar_prompts && outputs == ar_outputs;
        for (size_t t = 0; t < std::min(prompts.size(), ar_prompts.size()); ++t) {
          if (prompts[t] != ar_prompts[t]) break;  // an earlier turn parted already
          const std::vector<Token>& a = ar_outputs[t];
          const std::vector<Token>& o = outputs[t];
          size_t k = 0;
          while (k < a.size() && k < o.size() && a[k] == o[k]) ++k;
          if (k == a.size() || k == o.size()) continue;  // one stops where the other goes on: no token differs
          if (prompts[t].empty()) throw std::runtime_error(file + ": " + id + " has an empty prompt");
          // Every token the replay feeds to llama.cpp, and the other method's at the divergence.
          const auto in_vocab = [&](Token x) { return x >= 0 && x < model->n_vocab(); };
          if (!std::all_of(prompts[t].begin(), prompts[t].end(), in_vocab) ||
              !std::all_of(a.begin(), a.end(), in_vocab) || !in_vocab(o[k])) {
            throw std::runtime_error(file + ": " + id + " holds a token not in the target's vocabulary");
          }
          const auto key = std::make_tuple(temp, id, row.value("rep", 0), t, k, o[k]);  // a sampled margin is not a greedy one
          auto found = seen.find(key);
          if (found == seen.end()) {
            std::optional<graft::SamplingParams> turn_sp = sp;
            if (turn_sp) turn_sp->stream = t;  // bench samples each turn as its own stream
            found = seen.emplace(key, MarginAt(*ctx, prompts[t], a, k, o[k], turn_sp ? &*turn_sp : nullptr, tie)).first;
          }
          const Margin& m = found->second;
          const double margin = sp ? m.sample.margin : static_cast<double>(m.ar_logit) - m.other_logit;
          const double batched = sp ? m.sample_batched.margin : m.batched;
          const double allowed = sp ? m.sample.allowed : (tie > 0 ? tie : 2.0 * m.diff);
          ++divergences;
          const bool near = margin < allowed;
          ties += near;
          unreproduced += !m.reproduced;
          widest = std::max(widest, margin);
          std::printf("%-28s %-14s %4zu %5zu  %-16.16s %-16.16s %8.4f %5d %8.4f %8.4f %s%s\n", id.c_str(),
                      config.c_str(), t, k, json(model->TokenToPiece(a[k])).dump().c_str(),
                      json(model->TokenToPiece(o[k])).dump().c_str(), margin, m.rank, batched, allowed,
                      near ? "yes" : "NO", m.reproduced ? "" : "  (the replay did not reproduce ar's tokens)");
          shifted += batched < 0;
          break;  // the turns after it start from different text
        }
      }
    }
    std::printf("divergences %lld, at a near-tie %lld (", static_cast<long long>(divergences),
                static_cast<long long>(ties));
    if (tie > 0) std::printf("margin < %.3g logits", tie);
    else std::printf("margin < 2 x the 16-row pass's difference");
    if (any_sampled) std::printf("; sampled: u's distance to an end of ar's token's interval < how far that moves it");
    std::printf("), widest margin %.4f", widest);
    std::printf(", the other token ahead in a 16-row pass %lld", static_cast<long long>(shifted));
    for (const auto& [temp, n] : identical) {
      std::printf("; T = %g: %lld of %lld rows identical to ar", temp, static_cast<long long>(n.second),
                  static_cast<long long>(n.first));
    }
    if (unreproduced > 0) std::printf(", %lld not reproduced", static_cast<long long>(unreproduced));
    std::printf("\n");
    return ties == divergences ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tie_margins: %s\n", e.what());
    return 2;
  }
}
