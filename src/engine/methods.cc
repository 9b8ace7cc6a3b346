// Method names and the statistics' arithmetic and text form (engine.h).
#include <algorithm>
#include <cstdio>

#include "graft/engine.h"
#include "graft/error.h"

namespace graft {

Method ParseMethod(const std::string& name) {
  for (Method m : AllMethods()) {
    if (MethodName(m) == name) return m;
  }
  if (name == "oracle") return Method::kOracle;
  throw Error("unknown method '" + name + "'; choose one of ar, chain, tree, pruned, pld, suffix, rest, recycle, graft");
}

std::string MethodName(Method m) {
  switch (m) {
    case Method::kAr: return "ar";
    case Method::kChain: return "chain";
    case Method::kTree: return "tree";
    case Method::kPruned: return "pruned";
    case Method::kPld: return "pld";
    case Method::kSuffix: return "suffix";
    case Method::kRest: return "rest";
    case Method::kRecycle: return "recycle";
    case Method::kGraft: return "graft";
    case Method::kOracle: return "oracle";
  }
  return "?";
}

bool MethodNeedsDraft(Method m) {
  return m == Method::kChain || m == Method::kTree || m == Method::kPruned || m == Method::kGraft;
}

std::vector<Method> AllMethods() {
  return {Method::kAr,     Method::kChain, Method::kTree,    Method::kPruned, Method::kPld,
          Method::kSuffix, Method::kRest,  Method::kRecycle, Method::kGraft};
}

void GenerationStats::Add(const GenerationStats& b) {
  n_prompt += b.n_prompt;
  n_generated += b.n_generated;
  n_passes += b.n_passes;
  n_draft_passes += b.n_draft_passes;
  n_draft_steps += b.n_draft_steps;
  nodes_verified += b.nodes_verified;
  n_drafted += b.n_drafted;
  n_grafted += b.n_grafted;
  n_accepted += b.n_accepted;
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
  stop_reason = b.stop_reason;
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
