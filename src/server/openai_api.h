// The OpenAI wire format: request validation for /v1/completions and
// /v1/chat/completions, and the response / stream-chunk / error bodies.
// No HTTP and no model here (tokenizing and the context check live in server.cc),
// so every rule is unit-tested without loading anything.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graft/backend.h"
#include "graft/engine.h"

namespace graft::server {

// A request the server refuses, in OpenAI's error shape:
//   {"error": {"message", "type", "param", "code"}} with HTTP `status`.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // "" -> null
  std::string code;   // "" -> null
  std::string type = "invalid_request_error";
};
nlohmann::json ErrorJson(const ApiError& e);

enum class Endpoint { kCompletions, kChat };

// What a request may ask for, and what it gets when it does not ask.
struct RequestPolicy {
  std::vector<std::string> model_names;  // names of the served model (first = the id we report; any "model" is accepted)
  DecodeOptions decode;                  // method / budget defaults (from the command line)
  SamplingParams sampling;               // temperature / top_p / top_k / seed defaults
  // A request without "seed" gets a fresh random one (FreshSeed) when set, else
  // sampling.seed (`graft serve -s N`). Either way the seed that ran is in the
  // response's `graft.seed` (the last chunk's when streamed): the same request with
  // that seed gives the same text, on any slot, under any load, with any method.
  bool fresh_seed = true;
  int32_t default_max_tokens = 256;      // when the request gives none
  int32_t max_tokens_limit = 4096;       // larger max_tokens is refused
  int32_t max_budget = 64;               // largest graft.budget (the engines' tree limit)
  size_t max_stop = 16;                  // stop sequences per request
  size_t max_stop_bytes = 256;           // bytes per stop sequence
  bool cache_prompt = false;             // a request's cache_prompt when it gives none (--cache-prompt)
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string prompt;                  // completions, given as text
  std::vector<Token> prompt_tokens;    // completions, given as token ids (then prompt is "")
  std::vector<ChatMessage> messages;   // chat
  int32_t max_tokens = 0;              // >= 1, policy default when absent
  SamplingParams sampling;
  DecodeOptions decode;
  std::vector<std::string> stop;       // non-empty strings
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  // llama-server's cache_prompt: keep the cache of the prompt prefix a slot already
  // holds (GenerateRequest::reuse_prefix); the policy's default when absent.
  bool cache_prompt = false;
};

// Parses and validates a request body. Throws ApiError (4xx) naming the offending
// parameter. Unknown top-level fields are ignored (clients send many); unknown keys
// inside the `graft` extension are refused (they are typos).
ParsedRequest ParseRequest(const std::string& body, Endpoint endpoint, const RequestPolicy& policy);

// Identity of one response; every chunk of a stream repeats it.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens whose cache was kept (cache_prompt), not prefilled
};

// OpenAI's usage object: prompt, completion and total tokens, and
// prompt_tokens_details.cached_tokens.
nlohmann::json UsageJson(const Usage& u);

// Our `graft` stats object: method, tau, acceptance, passes, per-source counts.
nlohmann::json GraftStatsJson(const GenerationStats& st, Method m);

// The whole (non-streamed) response.
nlohmann::json CompletionJson(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
                              const Usage& usage, const nlohmann::json& graft_stats);

// One stream chunk. `first` adds the assistant role (chat); `finish_reason` set only
// on the last chunk.
nlohmann::json ChunkJson(const ResponseMeta& meta, const std::string& delta, bool first,
                         const std::optional<std::string>& finish_reason);

// JSON text for the wire: invalid UTF-8 (a token split mid-character at the very end)
// becomes U+FFFD instead of throwing.
std::string Dump(const nlohmann::json& j);

}  // namespace graft::server
