// One JSON form of GenerationStats, shared by `graft generate --json`, the bench
// rows and the server's `graft` response field, so scripts see the same keys
// everywhere: method, prompt_tokens, new_tokens, target_passes, draft_passes,
// draft_steps, nodes_verified, drafted, grafted, accepted, acceptance, tau,
// prefill/decode tokens_per_s, per_source{src: proposed, accepted, acceptance},
// ms{prefill, calibrate, draft, retrieve, graft, verify, commit, decode}, stop_reason,
// seed (the request's sampling seed: the same request with it gives the same tokens).
#pragma once

#include <nlohmann/json.hpp>

#include "graft/engine.h"

namespace graft {

nlohmann::json StatsToJson(const GenerationStats& stats, Method method);

// {source name: {proposed, accepted, acceptance}} for sources that proposed anything.
nlohmann::json PerSourceJson(const GenerationStats& stats);

}  // namespace graft
