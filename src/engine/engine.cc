// The decoding loop. Every method is a configuration of one step:
//   propose (draft / retrieve / graft) -> verify (one target pass) -> commit -> learn.
#include "graft/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/cost_model.h"
#include "engine/drafter.h"
#include "engine/topk.h"
#include "graft/calibration.h"
#include "graft/error.h"
#include "graft/graft.h"
#include "graft/retrieval_datastore.h"
#include "graft/retrieval_next_token.h"
#include "graft/retrieval_pld.h"
#include "graft/retrieval_suffix.h"
#include "graft/verify.h"

namespace graft {
namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr int32_t kContextTail = 64;  // context tokens handed to retrieval sources
constexpr int32_t kRecycleK = 8;      // top-k of verification logits fed to the table

}  // namespace

struct Engine::State {
  const Model& target;
  const Model* draft;
  EngineConfig config;
  std::unique_ptr<Context> tctx;
  std::unique_ptr<Context> dctx;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<Datastore> datastore;
  HistoryIndex history;
  NextTokenTable recycle;
  Calibration calibration;
  RequestRetriever request;
  PromptLookup pld;
  CostModel cost;   // target pass ms by tree size (graft's tree-size choice)
  DraftGate gate;   // does the draft model pay on this machine (graft)
  std::vector<Token> tctx_tokens;  // tokens in the target cache (prefix reuse across requests)

  State(const Model& t, const Model* d, const EngineConfig& c)
      : target(t),
        draft(d),
        config(c),
        history(HistoryOptions{c.history_tokens, {}}),
        recycle(t.n_vocab()),
        calibration(CalibrationOptions{.source_scale_prior = 0.5}),
        request(RetrievalOptions{}, &history),
        cost(c.max_tree) {}

  // Times target passes over trees of several sizes on top of the current prefix
  // (then drops them) to seed the cost model. About 3 x (sum of the pass times):
  // ~1.3 s once per engine for a 1.5B model on 2 CPU cores.
  void CalibrateCosts() {
    Rng rng(12345);
    std::vector<std::pair<int32_t, double>> points;
    const int32_t base = tctx->n_past();
    for (int32_t n = 1; n <= std::min(tctx->max_tree(), 32); n *= 2) {
      if (base + n + 1 >= tctx->n_ctx()) break;
      std::vector<double> ms;
      for (int rep = 0; rep < 3; ++rep) {
        TokenTree t;
        t.Reset(static_cast<Token>(rng.Next() % target.n_vocab()));
        while (t.size() < n) {
          const int32_t p = static_cast<int32_t>(rng.Next() % t.size());
          const Token x = static_cast<Token>(rng.Next() % target.n_vocab());
          if (t.depth[p] < 8 && t.FindChild(p, x) < 0) t.Add(p, x, 0.5f, Source::kDraft);
        }
        const auto t0 = Clock::now();
        tctx->EvalTree(t);
        tctx->Logits(n - 1);
        ms.push_back(MsSince(t0));
        tctx->CommitPath({0});
        tctx->Truncate(base);
      }
      std::sort(ms.begin(), ms.end());
      points.push_back({n, ms[1]});
    }
    if (!points.empty()) cost.SetVerifyCurve(points);
  }
};

Engine::Engine(const Model& target, const Model* draft, const EngineConfig& config)
    : s_(std::make_unique<State>(target, draft, config)) {
  if (config.max_tree < 1) throw Error("tree budget must be at least 1");
  ContextOptions co;
  co.n_ctx = config.n_ctx;
  co.n_threads = config.n_threads;
  co.max_tree = config.max_tree;
  co.n_seq_max = std::clamp(config.max_tree, 1, 256);
  s_->tctx = std::make_unique<Context>(target, co);
  if (draft != nullptr) {
    CheckDraftCompatible(target, *draft);
    ContextOptions dco = co;
    dco.max_tree = 64;
    dco.n_seq_max = 128;
    s_->dctx = std::make_unique<Context>(*draft, dco);
    s_->drafter = std::make_unique<Drafter>(s_->dctx.get());
  }
  if (!config.index_path.empty()) {
    s_->datastore = Datastore::Open(config.index_path, target.VocabFingerprint());
  }
}

Engine::~Engine() = default;

const Model& Engine::target() const { return s_->target; }
const Model* Engine::draft() const { return s_->draft; }
bool Engine::has_index() const { return s_->datastore != nullptr; }

void Engine::Validate(const DecodeOptions& o) const {
  if (MethodNeedsDraft(o.method) && s_->draft == nullptr) {
    throw Error("method " + MethodName(o.method) +
                " needs a draft model (-md); without one use ar, pld, suffix, rest or recycle");
  }
  if (o.method == Method::kRest && s_->datastore == nullptr) {
    throw Error("method rest needs a corpus datastore (--index PATH, built with `graft index build`)");
  }
  if (o.tree_budget < 1) throw Error("tree budget must be at least 1");
  if (o.tree_budget > s_->tctx->max_tree() || o.tree_budget > s_->tctx->n_seq_max()) {
    throw Error("tree budget " + std::to_string(o.tree_budget) + " exceeds this engine's limit of " +
                std::to_string(std::min(s_->tctx->max_tree(), s_->tctx->n_seq_max())) +
                " (the context's sequence limit)");
  }
  if (o.draft_max < 1 || o.draft_topk < 1 || o.draft_frontier < 1) {
    throw Error("draft depth, top-k and frontier must be at least 1");
  }
}

GenerateResult Engine::Generate(const GenerateRequest& req, const DecodeOptions& o) {
  Validate(o);
  State& s = *s_;
  if (req.prompt.empty()) throw Error("the prompt is empty");
  if (req.n_predict < 1) throw Error("n_predict must be at least 1");
  Context& tctx = *s.tctx;
  if (static_cast<int32_t>(req.prompt.size()) >= tctx.n_ctx()) {
    throw Error("prompt is " + std::to_string(req.prompt.size()) + " tokens but the context holds " +
                std::to_string(tctx.n_ctx()) + " (raise -c or shorten the prompt)");
  }
  GenerateResult result;
  GenerationStats& st = result.stats;
  st.n_prompt = static_cast<int32_t>(req.prompt.size());
  const int32_t nv = s.target.n_vocab();
  const bool greedy = req.sampling.temperature <= 0.0f;
  Rng rng(req.sampling.seed);

  // Prefill all but the last prompt token (the first root), reusing a common prefix.
  auto t0 = Clock::now();
  std::vector<Token> committed = req.prompt;
  {
    size_t common = 0;
    const size_t limit = s.config.reuse_prefix ? std::min(s.tctx_tokens.size(), committed.size() - 1) : 0;
    while (common < limit && s.tctx_tokens[common] == committed[common]) ++common;
    if (static_cast<int32_t>(common) < tctx.n_past()) tctx.Truncate(static_cast<int32_t>(common));
    tctx.Prefill(TokenSpan(committed).subspan(common, committed.size() - 1 - common), false);
  }
  if (s.dctx) {
    // The draft cache catches up lazily; drop what differs from this prompt.
    size_t common = 0;
    const size_t limit = s.config.reuse_prefix ? std::min<size_t>(s.dctx->n_past(), committed.size() - 1) : 0;
    while (common < limit && common < s.tctx_tokens.size() && s.tctx_tokens[common] == committed[common]) ++common;
    if (static_cast<int32_t>(common) < s.dctx->n_past()) s.dctx->Truncate(static_cast<int32_t>(common));
  }
  s.tctx_tokens = committed;
  s.tctx_tokens.pop_back();
  st.t_prefill_ms = MsSince(t0);
  if (o.method == Method::kGraft && o.adaptive && !s.cost.calibrated()) {
    const auto tc = Clock::now();
    s.CalibrateCosts();
    st.t_calibrate_ms = MsSince(tc);
  }
  const bool use_request = o.method == Method::kSuffix || o.method == Method::kGraft;
  if (use_request) s.request.Reset(req.prompt);

  auto t_decode = Clock::now();
  double lazy_prefill_ms = 0;  // draft prompt prefill done inside the loop (counted as prefill)
  TokenTree tree;
  std::vector<std::pair<float, Token>> topk;     // recycle: (prob, token) of one verified row
  std::vector<Token> topk_tok;
  std::vector<float> topk_prob;
  int32_t generated = 0;
  st.stop_reason = "length";
  bool done = false;
  while (!done) {
    const int32_t room = tctx.n_ctx() - tctx.n_past();
    if (room < 1) {
      st.stop_reason = "context";
      break;
    }
    const int32_t budget = std::max(1, std::min(o.tree_budget, room));
    const int32_t max_depth = std::min(o.draft_max, room - 1);
    tree.Reset(committed.back());
    bool drafted = false;

    // Retrieval queries: each fills one trie, grafted under `node`.
    std::vector<CandidateTrie> tries;
    std::vector<GraftRequest> grafts;  // [i] grafts tries[i]; pointers set in graft_all
    auto context_for = [&](int32_t node) {
      const size_t from = committed.size() > kContextTail ? committed.size() - kContextTail : 0;
      std::vector<Token> ctx(committed.begin() + from, committed.end());
      std::vector<Token> path = tree.PathTokens(node);
      ctx.insert(ctx.end(), path.begin() + 1, path.end());
      return ctx;
    };
    auto query = [&](const RetrievalSource& src, int32_t node, int32_t nodes) {
      if (nodes < 1) return;
      tries.emplace_back();
      src.Query(context_for(node), nodes, &tries.back());
      if (tries.back().empty()) tries.pop_back();
      else grafts.push_back({node, nullptr, src.source()});
    };
    auto graft_all = [&](float min_accept) {
      if (grafts.empty()) return;
      for (size_t i = 0; i < grafts.size(); ++i) grafts[i].trie = &tries[i];
      GraftOptions go;
      go.min_accept_prob = min_accept;
      go.max_depth = room - 1;
      GraftMany(&tree, grafts, budget, s.calibration, go);
      grafts.clear();
      tries.clear();
    };

    // Graft, retrieve first: when the request, history and corpus indexes already
    // promise enough, or when drafting has not paid on this machine lately
    // (DraftGate), the draft model (the main cost on CPU) sits this step out.
    const auto t_step = Clock::now();
    double step_prefill_ms = 0;  // the draft's lazy prompt prefill, if it happens this step
    auto tp = t_step;
    bool skip_draft = false;
    const bool adaptive = o.method == Method::kGraft && o.adaptive;
    if (o.method == Method::kGraft && (o.skip_draft_gain > 0 || adaptive)) {
      query(s.request, 0, budget - 1);
      if (s.datastore) query(*s.datastore, 0, budget - 1);
      query(s.recycle, 0, budget - 1);
      graft_all(o.prune.min_accept_prob);
      skip_draft = (adaptive && !s.gate.ShouldDraft()) ||
                   (o.skip_draft_gain > 0 && ExpectedAcceptedLength(tree, s.calibration) >= o.skip_draft_gain);
      if (!skip_draft) tree.Reset(committed.back());
    }
    st.t_retrieve_ms += MsSince(tp);

    // 1-2. Draft (and prune).
    tp = Clock::now();
    if (MethodNeedsDraft(o.method) && max_depth >= 1 && !skip_draft) {
      DraftParams dp;
      dp.budget = budget;
      dp.max_depth = max_depth;
      if (o.method == Method::kChain) {
        dp.topk = 1;
        dp.frontier = 1;
        dp.budget = std::min(budget, max_depth + 1);
        dp.p_min = o.draft_p_min;
      } else {
        dp.topk = o.draft_topk;
        dp.frontier = o.draft_frontier;
      }
      if (o.method == Method::kPruned || o.method == Method::kGraft) {
        dp.calibration = &s.calibration;
        dp.min_accept = o.prune.min_accept_prob;
      }
      // The draft's copy of the prompt is prefill, whenever it happens (lazily:
      // graft may never draft); only the catch-up on generated tokens is draft time.
      const int32_t prompt_end = static_cast<int32_t>(req.prompt.size()) - 1;
      if (s.dctx->n_past() < prompt_end) {
        const auto tpf = Clock::now();
        s.dctx->Prefill(TokenSpan(req.prompt).subspan(s.dctx->n_past(), prompt_end - s.dctx->n_past()), false);
        step_prefill_ms = MsSince(tpf);
        st.t_prefill_ms += step_prefill_ms;
        lazy_prefill_ms += step_prefill_ms;
        tp += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(step_prefill_ms));
      }
      st.n_draft_passes += s.drafter->Draft(committed, dp, &tree);
      ++st.n_draft_steps;
      drafted = true;
      if (o.method == Method::kChain && tree.size() - 1 < o.draft_min) tree.Reset(committed.back());
      if (dp.calibration != nullptr) {
        std::vector<int32_t> kept;
        PruneOptions po = o.prune;
        po.max_depth = std::min(po.max_depth, max_depth);
        tree = Prune(tree, po, s.calibration, &kept);
        s.drafter->Remap(kept);
      }
    }
    st.t_draft_ms += MsSince(tp);

    // 3-4. Retrieve and graft into the free slots.
    tp = Clock::now();
    const int32_t free_slots = budget - tree.size();
    if (free_slots > 0 && !skip_draft) {
      switch (o.method) {
        case Method::kPld: query(s.pld, 0, free_slots); break;
        case Method::kSuffix: query(s.request, 0, free_slots); break;
        case Method::kRest: query(*s.datastore, 0, free_slots); break;
        case Method::kRecycle: query(s.recycle, 0, free_slots); break;
        case Method::kOracle: {
          tries.emplace_back();
          int32_t parent = -1;
          for (int32_t i = generated; i < static_cast<int32_t>(req.oracle.size()) && tries.back().size() < free_slots; ++i) {
            parent = tries.back().Add(parent, req.oracle[i], 1.0f);
          }
          if (tries.back().empty()) tries.pop_back();
          else grafts.push_back({0, nullptr, Source::kOracle});
          break;
        }
        case Method::kGraft: {
          // The root and the best kept nodes, most probable first.
          std::vector<double> acc = PathAcceptance(tree, s.calibration);
          std::vector<int32_t> nodes(tree.size());
          for (int32_t i = 0; i < tree.size(); ++i) nodes[i] = i;
          std::stable_sort(nodes.begin() + 1, nodes.end(), [&](int32_t x, int32_t y) { return acc[x] > acc[y]; });
          nodes.resize(std::min<size_t>(nodes.size(), 1 + o.retrieve_nodes));
          for (int32_t n : nodes) {
            query(s.request, n, free_slots);
            if (s.datastore) query(*s.datastore, n, free_slots);
            query(s.recycle, n, free_slots);
          }
          break;
        }
        default: break;
      }
    }
    st.t_retrieve_ms += MsSince(tp);
    tp = Clock::now();
    graft_all(o.method == Method::kGraft ? o.prune.min_accept_prob : 0.0f);
    if (adaptive && tree.size() > 1) {
      // Keep the tree size that maximises expected tokens per ms of this step.
      std::vector<double> acc = PathAcceptance(tree, s.calibration);
      std::vector<double> sorted(acc.begin() + 1, acc.end());
      std::stable_sort(sorted.begin(), sorted.end(), std::greater<>());
      const int32_t n_best = s.cost.BestSize(sorted, MsSince(t_step) - step_prefill_ms, budget);
      if (n_best < tree.size()) {
        PruneOptions keep;
        keep.min_accept_prob = 0.0f;
        keep.max_depth = 1 << 30;
        keep.max_nodes = n_best;
        std::vector<int32_t> kept;
        tree = Prune(tree, keep, s.calibration, &kept);
        if (drafted) s.drafter->Remap(kept);
      }
    }
    st.t_graft_ms += MsSince(tp);

    // 5. Verify in one target pass.
    tp = Clock::now();
    tctx.EvalTree(tree);
    tctx.Logits(0);  // waits for the pass
    s.cost.ObserveVerify(tree.size(), MsSince(tp));
    VerifyResult vr = greedy
        ? VerifyGreedy(tree, [&](int32_t node) { return Argmax(tctx.Logits(node), nv); })
        : VerifyStochastic(tree, [&](int32_t node) { return MakeDistribution(tctx.Logits(node), nv, req.sampling); }, rng);
    st.t_verify_ms += MsSince(tp);

    // 6. Learn, then commit.
    tp = Clock::now();
    ++st.n_passes;
    st.nodes_verified += tree.size();
    for (int32_t i = 1; i < tree.size(); ++i) {
      auto& c = st.per_source[static_cast<int>(tree.source[i])];
      ++c.proposed;
      (tree.source[i] == Source::kDraft ? st.n_drafted : st.n_grafted)++;
    }
    for (size_t i = 1; i < vr.accepted.size(); ++i) ++st.per_source[static_cast<int>(tree.source[vr.accepted[i]])].accepted;
    st.n_accepted += vr.num_accepted_proposals();
    if (o.learn) {
      RecordOutcome(tree, vr, &s.calibration);
      if (o.method == Method::kRecycle || o.method == Method::kGraft) {
        for (int32_t node : vr.accepted) {
          TopKSoftmax(tctx.Logits(node), nv, kRecycleK, &topk);
          topk_tok.clear();
          topk_prob.clear();
          for (const auto& [p, t] : topk) {
            topk_tok.push_back(t);
            topk_prob.push_back(p);
          }
          s.recycle.Update(tree.token[node], topk_tok, topk_prob);
        }
      }
    }
    tctx.CommitPath(vr.accepted);
    if (drafted) s.drafter->Commit(vr.accepted);
    std::vector<Token> emitted = vr.CommittedTokens(tree);
    for (int32_t node : vr.accepted) s.tctx_tokens.push_back(tree.token[node]);
    // Cut at end-of-generation or the length limit.
    std::vector<Token> out;
    for (Token t : emitted) {
      if (s.target.IsEog(t)) {
        st.stop_reason = "eog";
        done = true;
        break;
      }
      out.push_back(t);
      if (++generated >= req.n_predict) {
        done = true;
        break;
      }
    }
    committed.insert(committed.end(), emitted.begin(), emitted.end());
    if (use_request) s.request.Append(emitted);
    result.tokens.insert(result.tokens.end(), out.begin(), out.end());
    st.t_commit_ms += MsSince(tp);
    if (adaptive) s.gate.Observe(drafted, static_cast<int32_t>(emitted.size()), MsSince(t_step) - step_prefill_ms);
    if (req.on_tokens && !out.empty() && !req.on_tokens(out)) {
      st.stop_reason = "cancelled";
      done = true;
    }
  }
  st.n_generated = static_cast<int32_t>(result.tokens.size());
  st.t_decode_ms = MsSince(t_decode) - lazy_prefill_ms;
  if (o.learn && !result.tokens.empty()) s.history.AddOutput(result.tokens);
  return result;
}

}  // namespace graft
