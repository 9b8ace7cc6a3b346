#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "bench/peers.h"
#include "engine/cost_model.h"
#include "graft/cost_profile.h"
#include "graft/error.h"

namespace graft::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kWarmupPrompt = "Write one sentence about the sea.";
constexpr int32_t kWarmupTokens = 8;
constexpr int32_t kTurnSlack = 32;  // template tokens per extra turn, reserved in n_ctx

bool Greedy(float temperature) { return temperature <= 0.0f; }


std::vector<Token> Concat(const std::vector<std::vector<Token>>& parts) {
  std::vector<Token> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

std::string BenchConfig::Name() const {
  if (is_peer()) return peer;
  if (method == Method::kAr) return "ar";
  return MethodName(method) + "@" + std::to_string(budget);
}

std::string BenchConfig::Label() const { return is_peer() ? peer : MethodName(method); }

// A prompt ready to run: its first turn encoded (and cut to the cap when needed).
struct PreparedPrompt {
  const BenchPrompt* prompt;
  int32_t index;
  std::string first_turn;  // text of turn 1 after truncation
  bool truncated = false;
  int32_t first_tokens = 0;
};

double ModelledMs(const GenerationStats& st, const CostModel& costs) {
  double ms = 0;
  ms += costs.VerifyPassesMs(st.pass_rows, st.pass_context, st.pass_row_context);
  // A lazy pass read its accepted rows, and some ahead of need in products (runs
  // without those counts, a peer's: its accepted rows, each alone).
  ms += st.rows_read + st.rows_read_ahead > 0 ? costs.ReadsMs(st.rows_read, st.read_products)
                                              : static_cast<double>(st.n_accepted) * costs.ReadMs(1);
  for (size_t n = 1; n < st.draft_pass_rows.size(); ++n) {
    ms += st.draft_pass_rows[n] * costs.DraftMs(static_cast<int32_t>(n));
  }
  return ms;
}

std::string PriceProfileName(PriceProfile p) {
  switch (p) {
    case PriceProfile::kMeasured: return "measured";
    case PriceProfile::kRowsFree: return "rows-free";
  }
  return "?";
}

PriceProfile ParsePriceProfile(const std::string& name) {
  for (PriceProfile p : {PriceProfile::kMeasured, PriceProfile::kRowsFree}) {
    if (name == PriceProfileName(p)) return p;
  }
  throw Error("unknown model profile '" + name + "' (profiles: measured, rows-free)");
}

CostProfile RowsFreeProfile(const CostProfile& m) {
  GRAFT_CHECK(m.verify_ms.size() >= 2 && m.verify_ms[1] > 0, "a rows-free profile needs the measured 1-row pass");
  CostProfile p = m;
  // A curve flat at its 1-row value, as long as the measured one (0 where not timed).
  auto flat = [](const std::vector<double>& ms) {
    std::vector<double> out(ms.size(), 0.0);
    if (ms.size() < 2 || !(ms[1] > 0)) return std::vector<double>{};
    for (size_t n = 1; n < ms.size(); ++n) out[n] = ms[n] > 0 ? ms[1] : 0.0;
    return out;
  };
  p.verify_ms = flat(m.verify_ms);
  p.draft_ms = flat(m.draft_ms);
  p.verify_ms_long = flat(m.verify_ms_long);
  p.draft_ms_long = flat(m.draft_ms_long);
  p.read_row_ms = 0;
  p.read_ahead_ms = 0;
  p.read_product_ms.clear();
  return p;
}

struct Harness::Impl {
  const Model& target;
  const Model* draft;
  const HarnessOptions& o;
  const PeerRunner* peers = nullptr;
  int32_t n_ctx = 0;
  int32_t max_budget = 1;
  const CostModel* costs = nullptr;  // prices passes for modelled_speedup (null = none)
  // HarnessOptions::price_profiles' models, by name, for modelled_by (empty = none).
  std::vector<std::pair<std::string, CostModel>> price_models;

  // Prompt tokens of a conversation (user turns and assistant answers alternate).
  std::vector<Token> Encode(const std::vector<ChatMessage>& msgs) const { return EncodeText(PromptText(msgs)); }
  std::vector<Token> EncodeText(const std::string& text) const {
    return target.Tokenize(text, /*add_special=*/true, /*parse_special=*/!o.raw);
  }

  // The text Encode tokenizes (also what a peer is given): the chat template, or with
  // --raw the user turns joined by blank lines.
  std::string PromptText(const std::vector<ChatMessage>& msgs) const {
    if (!o.raw) return target.ApplyChatTemplate(msgs, /*add_assistant=*/true);
    std::string text;
    for (const auto& m : msgs) {
      if (m.role == "system") continue;
      if (!text.empty()) text += "\n\n";
      text += m.content;
    }
    return text;
  }

  std::vector<ChatMessage> FirstTurn(const std::string& text) const {
    std::vector<ChatMessage> m;
    if (!o.system.empty()) m.push_back({"system", o.system});
    m.push_back({"user", text});
    return m;
  }

  // Cuts the middle of `text` until the encoded first turn has at most `cap` tokens.
  std::string Truncate(const std::string& text, int32_t cap, int32_t* n_tokens) const {
    const std::vector<Token> content = target.Tokenize(text, false, false);
    int32_t total = static_cast<int32_t>(Encode(FirstTurn(text)).size());
    int32_t keep = static_cast<int32_t>(content.size()) - (total - cap) - 8;
    std::string out = text;
    for (int attempt = 0; attempt < 8 && total > cap; ++attempt) {
      keep = std::max<int32_t>(keep, 2);
      const int32_t head = keep / 2, tail = keep - head;
      const TokenSpan all(content);
      out = target.Detokenize(all.first(head)) + "\n[...]\n" + target.Detokenize(all.last(tail));
      total = static_cast<int32_t>(Encode(FirstTurn(out)).size());
      keep -= std::max<int32_t>(total - cap, 0) + 4;
      if (keep <= 2 && total > cap) break;
    }
    if (total > cap) {
      throw Error("cannot fit a prompt into " + std::to_string(cap) +
                  " tokens (the chat template alone is too long); raise -c or --max-prompt-tokens");
    }
    *n_tokens = total;
    return out;
  }

  // The cap for a prompt's first turn: --max-prompt-tokens, and what leaves room in
  // the context for the answers of every turn and one tree.
  int32_t Cap(const BenchPrompt& p) const {
    const int32_t turns = static_cast<int32_t>(p.turns.size());
    int32_t fit = o.n_ctx - o.n_predict * turns - max_budget - kTurnSlack * turns;
    fit = std::max(fit, 16);
    return o.max_prompt_tokens > 0 ? std::min(o.max_prompt_tokens, fit) : fit;
  }

  EngineConfig Config(const BenchConfig& c) const {
    EngineConfig ec;
    ec.n_ctx = n_ctx;
    ec.n_threads = o.n_threads;
    ec.max_tree = std::max(c.budget, 1);
    if (c.method == Method::kRest || c.method == Method::kGraft) ec.index_path = o.index_path;
    ec.learned_state = o.learned_state;
    ec.lazy_logits = o.lazy_logits;
    ec.profile_dir = o.profile_dir;
    return ec;
  }

  std::unique_ptr<Engine> MakeEngine(const BenchConfig& c) const {
    return std::make_unique<Engine>(target, MethodNeedsDraft(c.method) ? draft : nullptr, Config(c));
  }

  DecodeOptions Options(const BenchConfig& c) const {
    DecodeOptions d = o.decode;
    d.method = c.method;
    d.tree_budget = std::max(c.budget, 1);
    return d;
  }

  // Every method samples a prompt's turn with the same seed and stream; each turn is its
  // own stream, since output positions restart at 0 every turn.
  SamplingParams Sampling(const BenchConfig& c, int32_t prompt_index, int32_t rep, int32_t turn) const {
    SamplingParams s = o.sampling;
    s.temperature = c.temperature;
    s.seed = o.sampling.seed + 7919ull * static_cast<uint64_t>(prompt_index) + 104729ull * static_cast<uint64_t>(rep);
    s.stream = static_cast<uint64_t>(turn);
    return s;
  }

  static void StartRow(const BenchConfig& c, const PreparedPrompt& pp, int32_t rep, BenchRow* row) {
    row->prompt_index = pp.index;
    row->prompt_id = pp.prompt->id;
    row->category = pp.prompt->category;
    row->config = c;
    row->rep = rep;
    row->truncated = pp.truncated;
    row->turns = 0;
  }

  // Runs one configuration over a prompt's turns. Returns false when cancelled.
  bool RunOne(Engine& engine, const BenchConfig& c, const PreparedPrompt& pp, int32_t rep, const BenchRow* ar,
              const std::atomic<bool>* stop, BenchRow* row) const {
    StartRow(c, pp, rep, row);
    const DecodeOptions opts = Options(c);
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    for (size_t k = 0; k < pp.prompt->turns.size(); ++k) {
      msgs.push_back({"user", k == 0 ? pp.first_turn : pp.prompt->turns[k]});
      GenerateRequest req;
      req.prompt = Encode(msgs);
      if (static_cast<int32_t>(req.prompt.size()) + c.budget + 2 > n_ctx) {
        row->stats.stop_reason = "context";
        break;  // a later turn that no longer fits (rare: long multi-turn prompts)
      }
      req.n_predict = o.n_predict;
      req.sampling = Sampling(c, pp.index, rep, static_cast<int32_t>(k));
      if (c.method == Method::kOracle && ar != nullptr && k < ar->outputs.size()) req.oracle = ar->outputs[k];
      if (stop != nullptr) req.on_tokens = [stop](const std::vector<Token>&) { return !stop->load(); };
      const auto t0 = Clock::now();
      GenerateResult res = engine.Generate(req, opts);
      row->wall_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (res.stats.stop_reason == "cancelled" || (stop != nullptr && stop->load())) return false;
      row->stats.Add(res.stats);
      ++row->turns;
      const std::string answer = target.Detokenize(res.tokens);
      if (o.keep_outputs) {
        row->text += (k ? "\n\n" : "") + answer;
        row->prompts.push_back(std::move(req.prompt));
      }
      row->outputs.push_back(std::move(res.tokens));
      msgs.push_back({"assistant", answer});
    }
    return true;
  }

  // Runs a peer over a prompt's turns (each turn a fresh process given the whole
  // conversation so far, with the peer's own answers). Returns false when cancelled;
  // a tool's failure is the row's error.
  bool RunPeer(const BenchConfig& c, const PreparedPrompt& pp, int32_t rep, const std::atomic<bool>* stop,
               BenchRow* row) const {
    StartRow(c, pp, rep, row);
    const PeerSpec& spec = ParsePeer(c.peer);
    PeerRun run;
    run.n_predict = o.n_predict;
    run.n_threads = o.n_threads;
    run.n_ctx = n_ctx;
    run.target_path = target.path();
    if (draft != nullptr) run.draft_path = draft->path();
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    for (size_t k = 0; k < pp.prompt->turns.size(); ++k) {
      msgs.push_back({"user", k == 0 ? pp.first_turn : pp.prompt->turns[k]});
      run.prompt_text = PromptText(msgs);
      const std::vector<Token> prompt = EncodeText(run.prompt_text);
      if (static_cast<int32_t>(prompt.size()) + 2 > n_ctx) {
        row->stats.stop_reason = "context";
        break;
      }
      run.prompt_tokens = static_cast<int32_t>(prompt.size());
      run.prompt_echo.clear();
      for (Token t : prompt) run.prompt_echo += target.TokenToPiece(t, /*special=*/true);
      const PeerReport r = peers->Run(spec, run, stop);
      if (stop != nullptr && stop->load()) return false;
      if (!r.ok()) {
        row->error = r.error;
        row->stats.stop_reason = "error";
        break;
      }
      GenerationStats s;
      s.n_prompt = r.n_prompt;
      s.n_generated = r.n_generated;
      s.n_passes = r.n_passes;
      s.nodes_verified = r.n_passes + std::max<int64_t>(r.n_drafted, 0);
      s.n_grafted = std::max<int64_t>(r.n_drafted, 0);  // proposals, whatever made them
      s.n_accepted = std::max<int64_t>(r.n_accepted, 0);
      s.t_prefill_ms = r.prefill_ms;
      s.t_decode_ms = r.decode_ms;
      s.stop_reason = r.eog ? "eog" : "length";
      row->stats.Add(s);
      row->wall_ms += r.prefill_ms + r.decode_ms;  // the tool's own times (model load excluded)
      ++row->turns;
      row->text += (k ? "\n\n" : "") + r.text;
      row->turn_texts.push_back(r.text);
      msgs.push_back({"assistant", r.text});
    }
    return true;
  }

  // A peer's outputs against ar's, as text per turn: lossless when each turn's text and
  // ar's agree up to the shorter one (a tool may run one token past -n, and counts its
  // end-of-generation token), or exactly where ar stopped at end-of-generation. first_divergence = ar tokens whose text the peer matched.
  void ComparePeer(const BenchRow& ar, BenchRow* r) const {
    bool same = r->turn_texts.size() == ar.outputs.size();
    int32_t matched = 0;
    bool diverged = false;
    for (size_t k = 0; k < ar.outputs.size() && k < r->turn_texts.size(); ++k) {
      const std::string& mine = r->turn_texts[k];
      std::string base;
      for (Token t : ar.outputs[k]) {
        base += target.TokenToPiece(t);
        if (!diverged && base.size() <= mine.size() && mine.compare(0, base.size(), base) == 0) ++matched;
        else diverged = true;
      }
      // ar ended this turn at end-of-generation: the peer must stop there too.
      const bool ar_stopped = static_cast<int32_t>(ar.outputs[k].size()) < o.n_predict;
      const size_t n = ar_stopped ? base.size() : std::min(base.size(), mine.size());
      if (base.compare(0, n, mine, 0, n) != 0 || (ar_stopped && mine.size() != base.size())) same = false;
    }
    r->first_divergence = same ? -1 : matched;
    if (Greedy(r->config.temperature) && r->error.empty()) r->lossless = same;
  }

  // Fills speedup, losslessness and the oracle fraction of one prompt's rows.
  void Compare(std::vector<BenchRow>* rows) const {
    auto find = [&](Method m, int32_t budget, float temp) -> const BenchRow* {
      for (const BenchRow& r : *rows) {
        if (r.config.is_peer()) continue;
        if (r.config.method == m && r.config.temperature == temp && (m == Method::kAr || r.config.budget == budget)) {
          return &r;
        }
      }
      return nullptr;
    };
    for (BenchRow& r : *rows) {
      const BenchRow* ar = find(Method::kAr, 0, r.config.temperature);
      if (ar == nullptr) continue;
      if (costs != nullptr && !r.config.is_peer()) {
        const double mine = ModelledMs(r.stats, *costs), base = ModelledMs(ar->stats, *costs);
        if (mine > 0) r.modelled_ms = mine;
        if (mine > 0 && base > 0 && ar->stats.n_generated > 0) {
          r.modelled_speedup = (r.stats.n_generated / mine) / (ar->stats.n_generated / base);
        }
      }
      for (const auto& [name, model] : price_models) {
        if (r.config.is_peer()) break;
        const double mine = ModelledMs(r.stats, model), base = ModelledMs(ar->stats, model);
        if (mine > 0 && base > 0 && ar->stats.n_generated > 0) {
          r.modelled_by[name] = (r.stats.n_generated / mine) / (ar->stats.n_generated / base);
        }
      }
      if (&r == ar) {
        r.speedup = r.decode_tps() > 0 ? std::optional<double>(1.0) : std::nullopt;
        r.e2e_speedup = r.wall_tps() > 0 ? std::optional<double>(1.0) : std::nullopt;
      } else {
        if (r.decode_tps() > 0 && ar->decode_tps() > 0) r.speedup = r.decode_tps() / ar->decode_tps();
        // End to end: against the time ar takes for as many tokens (its prefill plus
        // that many of its decode steps). Comparing tokens per wall second instead would
        // spread the prefill over outputs of different lengths (a near-tie divergence
        // that ends 10 tokens sooner read as a 12% slowdown).
        if (r.wall_ms > 0 && ar->stats.n_generated > 0) {
          const double ar_ms = (ar->wall_ms - ar->stats.t_decode_ms) +
                               r.stats.n_generated * ar->stats.t_decode_ms / ar->stats.n_generated;
          r.e2e_speedup = ar_ms / r.wall_ms;
        }
      }
      if (r.config.is_peer()) {
        ComparePeer(*ar, &r);
        continue;
      }
      const std::vector<Token> mine = Concat(r.outputs), base = Concat(ar->outputs);
      size_t i = 0;
      while (i < mine.size() && i < base.size() && mine[i] == base[i]) ++i;
      r.first_divergence = (mine == base) ? -1 : static_cast<int32_t>(i);
      // At T > 0 too: every method samples position t with ar's seed and uniform
      // (PositionSampler), so its text is ar's up to near-ties, as at T = 0.
      r.lossless = (mine == base);
    }
    for (BenchRow& r : *rows) {
      if (r.config.method == Method::kAr || r.config.is_peer()) continue;
      const BenchRow* orc = find(Method::kOracle, r.config.budget, r.config.temperature);
      if (orc != nullptr && r.speedup && orc->speedup && *orc->speedup > 0) {
        r.oracle_fraction = *r.speedup / *orc->speedup;
      }
    }
  }
};

Harness::Harness(const Model& target, const Model* draft, HarnessOptions options)
    : target_(target), draft_(draft), options_(std::move(options)) {
  HarnessOptions& o = options_;
  if (o.n_predict < 1) throw Error("-n must be at least 1 (got " + std::to_string(o.n_predict) + ")");
  if (o.reps < 1) throw Error("--reps must be at least 1");
  if (o.budgets.empty()) throw Error("--budgets needs at least one budget");
  if (o.temperatures.empty()) throw Error("--temps needs at least one temperature");
  if (o.price_profiles.empty()) throw Error("--model-profile needs at least one profile (measured, rows-free)");
  for (int32_t b : o.budgets) {
    if (b < 1 || b > 256) throw Error("tree budget " + std::to_string(b) + " is out of range [1, 256]");
  }
  for (float t : o.temperatures) {
    if (!(t >= 0.0f)) throw Error("temperatures must be >= 0");
  }
  std::vector<Method> methods = {Method::kAr};
  for (Method m : o.methods) {
    if (m == Method::kOracle) throw Error("oracle is not a method to list; use --oracle");
    if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  }
  o.methods = methods;
  std::vector<PeerSpec> specs;
  for (const std::string& name : o.peers) {
    specs.push_back(ParsePeer(name));
    if (specs.back().needs_draft && draft == nullptr) {
      throw Error("peer " + name + " needs a draft model (-md); drop it from --peers");
    }
  }
  if (!specs.empty()) {
    if (std::find(o.temperatures.begin(), o.temperatures.end(), 0.0f) == o.temperatures.end()) {
      throw Error("peers run greedy: add 0 to --temps");
    }
    const std::vector<std::string> missing = PeerRunner(o.peers_dir).Missing(specs);
    if (!missing.empty()) {
      throw Error("llama.cpp's tools are not built (missing " + missing.front() +
                  "); run scripts/setup.sh --peers");
    }
  }
  for (Method m : methods) {
    if (MethodNeedsDraft(m) && draft == nullptr) {
      throw Error("method " + MethodName(m) + " needs a draft model (-md); drop it from --methods");
    }
    if (m == Method::kRest && o.index_path.empty()) {
      throw Error("method rest needs a corpus datastore (--index PATH); drop it from --methods");
    }
  }
  for (float t : o.temperatures) {
    configs_.push_back({Method::kAr, 0, t});
    for (Method m : methods) {
      if (m == Method::kAr) continue;
      for (int32_t b : o.budgets) configs_.push_back({m, b, t});
    }
    if (o.oracle) {
      for (int32_t b : o.budgets) configs_.push_back({Method::kOracle, b, t});
    }
    if (t == 0.0f) {
      for (const std::string& p : o.peers) configs_.push_back({Method::kAr, 0, t, p});
    }
  }
}

Harness::~Harness() = default;

RunStatus Harness::Run(const std::vector<BenchPrompt>& prompts, const HarnessCallbacks& cb,
                       const std::atomic<bool>* stop) {
  const HarnessOptions& o = options_;
  const PeerRunner peers(o.peers_dir, o.peer_timeout_s);
  Impl impl{target_, draft_, o, &peers};
  impl.max_budget = *std::max_element(o.budgets.begin(), o.budgets.end());
  // The profile graft's engines use (the same options: these models, threads, machine,
  // folder), measured now if none is cached; a profile that cannot be had leaves the
  // modelled speedups empty rather than failing the run.
  std::optional<CostModel> costs;
  profile_.reset();
  try {
    BenchConfig largest;
    largest.method = Method::kGraft;
    largest.budget = impl.max_budget;
    CostProfileOptions po = CostProfileOptionsOf(impl.Config(largest));
    po.on_measure = [](const std::string& path) {
      fprintf(stderr,
              "bench: no usable cost profile is cached for these models on this machine; measuring one into %s\n",
              path.c_str());
    };
    CostProfile p = LoadOrMeasureCostProfile(target_, draft_, po);
    costs.emplace(CostModel::Of(p));
    for (PriceProfile pp : o.price_profiles) {
      impl.price_models.emplace_back(PriceProfileName(pp),
                                     CostModel::Of(pp == PriceProfile::kRowsFree ? RowsFreeProfile(p) : p));
    }
    profile_ = std::move(p);
    impl.costs = &*costs;
  } catch (const std::exception& e) {
    fprintf(stderr, "bench: warning: no cost profile (%s); modelled speedups are left out\n", e.what());
  }
  RunStatus status;
  rows_.clear();

  // Encode (and cut or skip) every first turn; size the contexts to the longest need.
  std::vector<PreparedPrompt> prepared;
  std::map<std::vector<std::string>, std::string> seen;  // turns as they will run -> the first prompt's id
  int64_t need = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const BenchPrompt& p = prompts[i];
    PreparedPrompt pp{&p, static_cast<int32_t>(i), p.turns.at(0)};
    pp.first_tokens = static_cast<int32_t>(impl.Encode(impl.FirstTurn(pp.first_turn)).size());
    const int32_t cap = impl.Cap(p);
    if (pp.first_tokens > cap) {
      if (o.long_prompts == LongPromptPolicy::kSkip) {
        status.skipped.push_back({p.id, p.category, pp.first_tokens, cap});
        continue;
      }
      pp.first_turn = impl.Truncate(pp.first_turn, cap, &pp.first_tokens);
      pp.truncated = true;
    }
    std::vector<std::string> turns = p.turns;
    turns[0] = pp.first_turn;
    if (const auto [it, fresh] = seen.emplace(std::move(turns), p.id); !fresh) {
      status.skipped.push_back({p.id, p.category, pp.first_tokens, cap, it->second});
      continue;
    }
    int64_t n = pp.first_tokens + static_cast<int64_t>(o.n_predict) * p.turns.size();
    for (size_t k = 1; k < p.turns.size(); ++k) {
      n += static_cast<int64_t>(target_.Tokenize(p.turns[k], false, false).size()) + kTurnSlack;
    }
    need = std::max(need, n);
    prepared.push_back(pp);
  }
  if (prepared.empty() && !prompts.empty()) {  // only too-long ones: a duplicate has its first run
    throw Error("all " + std::to_string(prompts.size()) + " prompts are longer than the prompt cap of " +
                std::to_string(status.skipped.front().cap) +
                " tokens; raise --max-prompt-tokens or -c, or use --long-prompts truncate");
  }
  need += impl.max_budget + 16;
  impl.n_ctx = static_cast<int32_t>(std::min<int64_t>(o.n_ctx, (need + 255) / 256 * 256));
  status.prompts_total = static_cast<int32_t>(prepared.size()) * o.reps;

  ProgressEvent ev;
  ev.total = static_cast<int64_t>(prepared.size()) * o.reps * configs_.size();
  ev.n_prompts = static_cast<int32_t>(prepared.size());
  auto stopped = [&] { return stop != nullptr && stop->load(); };

  for (int32_t rep = 0; rep < o.reps && !stopped(); ++rep) {
    ev.rep = rep;
    std::vector<std::unique_ptr<Engine>> engines;
    for (const BenchConfig& c : configs_) {
      if (c.is_peer()) {
        engines.push_back(nullptr);  // a process per generation
        continue;
      }
      engines.push_back(impl.MakeEngine(c));
      engines.back()->Validate(impl.Options(c));
    }
    if (o.warmup) {
      GenerateRequest req;
      req.prompt = impl.Encode(impl.FirstTurn(kWarmupPrompt));
      req.n_predict = std::min(o.n_predict, kWarmupTokens);
      for (size_t ci = 0; ci < configs_.size() && !stopped(); ++ci) {
        if (!engines[ci]) continue;
        DecodeOptions d = impl.Options(configs_[ci]);
        d.learn = false;
        req.sampling = impl.Sampling(configs_[ci], -1, rep, 0);
        engines[ci]->Generate(req, d);
        ev.warmup = true;
        ev.config = configs_[ci].Name();
        if (cb.on_progress) cb.on_progress(ev);
      }
      ev.warmup = false;
    }
    for (const PreparedPrompt& pp : prepared) {
      if (stopped()) break;
      ev.prompt = pp.index;
      ev.category = pp.prompt->category;
      std::vector<BenchRow> rows;
      rows.reserve(configs_.size());
      bool cancelled = false;
      for (size_t ci = 0; ci < configs_.size(); ++ci) {
        const BenchConfig& c = configs_[ci];
        const BenchRow* ar = nullptr;
        for (const BenchRow& r : rows) {
          if (r.config.method == Method::kAr && !r.config.is_peer() && r.config.temperature == c.temperature) ar = &r;
        }
        BenchRow row;
        const bool done = c.is_peer() ? impl.RunPeer(c, pp, rep, stop, &row)
                                      : impl.RunOne(*engines[ci], c, pp, rep, ar, stop, &row);
        if (!done) {
          cancelled = true;
          break;
        }
        rows.push_back(std::move(row));
        ++ev.done;
        ev.config = c.Name();
        if (cb.on_progress) cb.on_progress(ev);
      }
      if (cancelled) break;
      impl.Compare(&rows);
      for (BenchRow& r : rows) rows_.push_back(std::move(r));
      ++status.prompts_done;
      if (cb.on_prompt) cb.on_prompt(rows_, status);
    }
  }
  status.interrupted = status.prompts_done < status.prompts_total;
  return status;
}

}  // namespace graft::bench
