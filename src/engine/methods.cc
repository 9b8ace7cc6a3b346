// The method table (names, needs, proposer factories) and the statistics'
// arithmetic and text form (engine.h).
#include <algorithm>
#include <cstdio>

#include "engine/proposer.h"
#include "graft/engine.h"
#include "graft/error.h"

namespace graft {

namespace {

// The method table: adding a method = an enum value, a proposer file and a row here.
struct MethodInfo {
  Method method;
  const char* name;
  bool needs_draft;
  std::unique_ptr<Proposer> (*make)(EngineState& es, Method m);
};

constexpr MethodInfo kMethods[] = {
    {Method::kAr, "ar", false, [](EngineState&, Method) { return MakeArProposer(); }},
    {Method::kChain, "chain", true, MakeDraftProposer},
    {Method::kTree, "tree", true, MakeDraftProposer},
    {Method::kPruned, "pruned", true, MakeDraftProposer},
    {Method::kPld, "pld", false, MakeRetrievalProposer},
    {Method::kSuffix, "suffix", false, MakeRetrievalProposer},
    {Method::kRest, "rest", false, MakeRetrievalProposer},
    {Method::kRecycle, "recycle", false, MakeRetrievalProposer},
    {Method::kGraft, "graft", true, [](EngineState& es, Method) { return MakeGraftProposer(es); }},
    {Method::kOracle, "oracle", false, [](EngineState& es, Method) { return MakeOracleProposer(es); }},
};

const MethodInfo& Info(Method m) {
  for (const MethodInfo& info : kMethods) {
    if (info.method == m) return info;
  }
  throw Error("internal error: method " + std::to_string(static_cast<int>(m)) + " is not in the method table");
}

}  // namespace

Method ParseMethod(const std::string& name) {
  std::string names;
  for (const MethodInfo& info : kMethods) {
    if (info.name == name) return info.method;
    if (info.method != Method::kOracle) names += std::string(names.empty() ? "" : ", ") + info.name;
  }
  throw Error("unknown method '" + name + "'; choose one of " + names);
}

std::string MethodName(Method m) { return Info(m).name; }

bool MethodNeedsDraft(Method m) { return Info(m).needs_draft; }

std::vector<Method> AllMethods() {
  std::vector<Method> out;
  for (const MethodInfo& info : kMethods) {
    if (info.method != Method::kOracle) out.push_back(info.method);
  }
  return out;
}

std::unique_ptr<Proposer> MakeProposer(EngineState& es, Method m) { return Info(m).make(es, m); }

void GenerationStats::Add(const GenerationStats& b) {
  n_prompt += b.n_prompt;
  n_prompt_cached += b.n_prompt_cached;
  n_generated += b.n_generated;
  n_passes += b.n_passes;
  n_draft_passes += b.n_draft_passes;
  n_draft_steps += b.n_draft_steps;
  n_draft_declined += b.n_draft_declined;
  nodes_verified += b.nodes_verified;
  n_drafted += b.n_drafted;
  n_grafted += b.n_grafted;
  n_accepted += b.n_accepted;
  rows_read += b.rows_read;
  rows_read_ahead += b.rows_read_ahead;
  for (int s = 0; s < kNumSources; ++s) {
    per_source[s].proposed += b.per_source[s].proposed;
    per_source[s].accepted += b.per_source[s].accepted;
  }
  t_prefill_ms += b.t_prefill_ms;
  t_draft_ms += b.t_draft_ms;
  t_retrieve_ms += b.t_retrieve_ms;
  t_graft_ms += b.t_graft_ms;
  t_verify_ms += b.t_verify_ms;
  t_commit_ms += b.t_commit_ms;
  t_decode_ms += b.t_decode_ms;
  t_calibrate_ms += b.t_calibrate_ms;
  pass_context += b.pass_context;
  pass_row_context += b.pass_row_context;
  const auto add = [](auto& mine, const auto& theirs) {  // histograms, element by element
    if (mine.size() < theirs.size()) mine.resize(theirs.size(), 0);
    for (size_t n = 0; n < theirs.size(); ++n) mine[n] += theirs[n];
  };
  add(pass_rows, b.pass_rows);
  add(draft_pass_rows, b.draft_pass_rows);
  add(read_products, b.read_products);
  stop_reason = b.stop_reason;
  seed = b.seed;
}

void GenerationStats::CountPass(std::vector<int32_t>* hist, int32_t rows) {
  if (rows < 0) return;
  if (hist->size() <= static_cast<size_t>(rows)) hist->resize(rows + 1, 0);
  ++(*hist)[rows];
}

std::string FormatStats(const GenerationStats& st, Method m) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf),
                   "%-7s prompt %d tokens (%.1f t/s) | decoded %d tokens in %.2f s, %.2f t/s | "
                   "passes %d (%d drafted), %.1f nodes/pass, tau %.2f, drafted %lld, grafted %lld, accepted %lld (%.1f%%) | "
                   "ms: draft %.0f retrieve %.1f graft %.1f verify %.0f commit %.1f",
                   MethodName(m).c_str(), st.n_prompt, st.prefill_tps(), st.n_generated, st.t_decode_ms / 1000.0,
                   st.decode_tps(), st.n_passes, st.n_draft_steps, st.n_passes ? double(st.nodes_verified) / st.n_passes : 0.0, st.tau(), static_cast<long long>(st.n_drafted),
                   static_cast<long long>(st.n_grafted), static_cast<long long>(st.n_accepted),
                   100.0 * st.acceptance(), st.t_draft_ms, st.t_retrieve_ms, st.t_graft_ms, st.t_verify_ms,
                   st.t_commit_ms);
  return std::string(buf, std::min<int>(n, sizeof(buf) - 1));
}

}  // namespace graft
