#include "graft/stats_json.h"

namespace graft {

nlohmann::json PerSourceJson(const GenerationStats& st) {
  nlohmann::json per_source = nlohmann::json::object();
  for (int s = 1; s < kNumSources; ++s) {
    const SourceCounts& c = st.per_source[s];
    if (c.proposed == 0) continue;
    per_source[std::string(SourceName(static_cast<Source>(s)))] = {
        {"proposed", c.proposed}, {"accepted", c.accepted},
        {"acceptance", static_cast<double>(c.accepted) / c.proposed}};
  }
  return per_source;
}

nlohmann::json StatsToJson(const GenerationStats& st, Method m) {
  return {{"method", MethodName(m)},
          {"prompt_tokens", st.n_prompt},
          {"prompt_tokens_cached", st.n_prompt_cached},
          {"new_tokens", st.n_generated},
          {"prefill_tokens_per_s", st.prefill_tps()},
          {"decode_tokens_per_s", st.decode_tps()},
          {"target_passes", st.n_passes},
          {"draft_passes", st.n_draft_passes},
          {"draft_steps", st.n_draft_steps},
          {"draft_declined", st.n_draft_declined},
          {"nodes_verified", st.nodes_verified},
          {"drafted", st.n_drafted},
          {"grafted", st.n_grafted},
          {"accepted", st.n_accepted},
          {"rows_read", st.rows_read},
          {"rows_read_ahead", st.rows_read_ahead},
          {"read_products", st.read_products},
          {"acceptance", st.acceptance()},
          {"tau", st.tau()},
          {"per_source", PerSourceJson(st)},
          {"ms", {{"prefill", st.t_prefill_ms}, {"calibrate", st.t_calibrate_ms}, {"draft", st.t_draft_ms},
                  {"retrieve", st.t_retrieve_ms}, {"graft", st.t_graft_ms}, {"verify", st.t_verify_ms},
                  {"commit", st.t_commit_ms}, {"decode", st.t_decode_ms}}},
          {"stop_reason", st.stop_reason},
          {"seed", st.seed}};
}

}  // namespace graft
