#include "server/openai_api.h"

#include "graft/stats_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "graft/error.h"

namespace graft::server {
namespace {

using nlohmann::json;

[[noreturn]] void Fail(const std::string& param, const std::string& message, const std::string& code = "invalid_value",
                       int status = 400) {
  throw ApiError{status, message, param, code};
}

// `j[key]` if present and not null.
const json* Field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

double Number(const json& v, const std::string& param) {
  if (!v.is_number()) Fail(param, "'" + param + "' must be a number", "invalid_type");
  return v.get<double>();
}

int64_t Integer(const json& v, const std::string& param) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {  // 16.0 is fine, 16.5 is not
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  Fail(param, "'" + param + "' must be an integer", "invalid_type");
}

bool Bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) Fail(param, "'" + param + "' must be a boolean", "invalid_type");
  return v.get<bool>();
}

std::string String(const json& v, const std::string& param) {
  if (!v.is_string()) Fail(param, "'" + param + "' must be a string", "invalid_type");
  return v.get<std::string>();
}

// Message content: a string or a list of {"type": "text", "text": ...} parts.
std::string Content(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) Fail(param, "'" + param + "' must be a string or a list of text parts", "invalid_type");
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) Fail(p, "'" + p + "' must be an object", "invalid_type");
    const json* type = Field(part, "type");
    if (type == nullptr || !type->is_string() || *type != "text") {
      Fail(p + ".type", "only text content parts are supported", "unsupported_parameter");
    }
    const json* text = Field(part, "text");
    if (text == nullptr) Fail(p + ".text", "missing '" + p + ".text'", "missing_parameter");
    out += String(*text, p + ".text");
  }
  return out;
}

// Knobs of the OpenAI API (and llama-server's common sampling extensions) that graft
// does not implement. Sent at their no-op value they are accepted, as clients often
// send defaults; set to anything else they are a 400, not output sampled from a
// distribution other than the one asked for, or text that ignored a format.
void RejectUnsupported(const json& body) {
  const auto unsupported = [](const std::string& param, const std::string& what) {
    Fail(param, what + " not supported", "unsupported_parameter");
  };
  const std::pair<const char*, double> no_ops[] = {
      {"presence_penalty", 0.0}, {"frequency_penalty", 0.0}, {"repeat_penalty", 1.0},
      {"min_p", 0.0},            {"typical_p", 1.0},
  };
  for (const auto& [name, no_op] : no_ops) {
    if (const json* v = Field(body, name); v != nullptr && Number(*v, name) != no_op) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", no_op);
      unsupported(name, std::string("'") + name + "' other than " + buf + " is");
    }
  }
  const auto empty = [](const json& v) { return (v.is_object() || v.is_array()) && v.empty(); };
  if (const json* v = Field(body, "logit_bias"); v != nullptr && !empty(*v)) unsupported("logit_bias", "logit_bias is");
  if (const json* v = Field(body, "top_logprobs"); v != nullptr && Integer(*v, "top_logprobs") != 0) {
    unsupported("top_logprobs", "logprobs are");
  }
  for (const char* name : {"tools", "functions"}) {
    if (const json* v = Field(body, name); v != nullptr && !empty(*v)) unsupported(name, "tool and function calls are");
  }
  if (const json* v = Field(body, "response_format")) {
    if (!v->is_object()) Fail("response_format", "'response_format' must be an object", "invalid_type");
    const json* type = Field(*v, "type");
    if (type != nullptr && String(*type, "response_format.type") != "text") {
      unsupported("response_format.type", "a response_format other than text is");
    }
  }
  if (const json* v = Field(body, "suffix"); v != nullptr && String(*v, "suffix") != "") unsupported("suffix", "suffix is");
}

void ParsePrompt(const json& body, ParsedRequest* out) {
  const json* prompt = Field(body, "prompt");
  if (prompt == nullptr) Fail("prompt", "missing 'prompt'", "missing_parameter");
  if (prompt->is_string()) {
    out->prompt = prompt->get<std::string>();
    return;
  }
  if (!prompt->is_array()) Fail("prompt", "'prompt' must be a string, a list of one string, or a list of token ids",
                                "invalid_type");
  if (prompt->size() == 1 && (*prompt)[0].is_string()) {
    out->prompt = (*prompt)[0].get<std::string>();
    return;
  }
  if (!prompt->empty() && std::all_of(prompt->begin(), prompt->end(), [](const json& t) { return t.is_number_integer(); })) {
    for (const json& t : *prompt) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > INT32_MAX) Fail("prompt", "token id " + std::to_string(id) + " is out of range");
      out->prompt_tokens.push_back(static_cast<Token>(id));
    }
    return;
  }
  if (prompt->size() > 1) Fail("prompt", "only one prompt per request is supported", "unsupported_parameter");
  Fail("prompt", "'prompt' must be a string, a list of one string, or a list of token ids", "invalid_type");
}

void ParseMessages(const json& body, ParsedRequest* out) {
  const json* messages = Field(body, "messages");
  if (messages == nullptr) Fail("messages", "missing 'messages'", "missing_parameter");
  if (!messages->is_array() || messages->empty()) {
    Fail("messages", "'messages' must be a non-empty list of {role, content} objects", "invalid_type");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) Fail(p, "'" + p + "' must be an object", "invalid_type");
    const json* role = Field(m, "role");
    if (role == nullptr) Fail(p + ".role", "missing '" + p + ".role'", "missing_parameter");
    std::string r = String(*role, p + ".role");
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant") {
      Fail(p + ".role", "role '" + r + "' is not supported (system, developer, user, assistant)");
    }
    const json* content = Field(m, "content");
    if (content == nullptr) Fail(p + ".content", "missing '" + p + ".content'", "missing_parameter");
    out->messages.push_back({r, Content(*content, p + ".content")});
  }
}

void ParseStop(const json& body, const RequestPolicy& policy, ParsedRequest* out) {
  const json* stop = Field(body, "stop");
  if (stop == nullptr) return;
  std::vector<std::string> list;
  if (stop->is_string()) {
    list.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (size_t i = 0; i < stop->size(); ++i) list.push_back(String((*stop)[i], "stop[" + std::to_string(i) + "]"));
  } else {
    Fail("stop", "'stop' must be a string or a list of strings", "invalid_type");
  }
  if (list.size() > policy.max_stop) {
    Fail("stop", "at most " + std::to_string(policy.max_stop) + " stop sequences are allowed");
  }
  for (const auto& s : list) {
    if (s.empty()) Fail("stop", "stop sequences must not be empty");
    if (s.size() > policy.max_stop_bytes) {
      Fail("stop", "stop sequences must be at most " + std::to_string(policy.max_stop_bytes) + " bytes");
    }
  }
  out->stop = std::move(list);
}

void ParseGraft(const json& body, const RequestPolicy& policy, ParsedRequest* out) {
  const json* g = Field(body, "graft");
  if (g == nullptr) return;
  if (!g->is_object()) Fail("graft", "'graft' must be an object {method, budget}", "invalid_type");
  for (const auto& [key, value] : g->items()) {
    if (key != "method" && key != "budget") {
      Fail("graft." + key, "unknown key 'graft." + key + "' (known: method, budget)", "unsupported_parameter");
    }
  }
  if (const json* m = Field(*g, "method")) {
    const std::string name = String(*m, "graft.method");
    try {
      out->decode.method = ParseMethod(name);
    } catch (const Error& e) {
      Fail("graft.method", e.what());
    }
    if (out->decode.method == Method::kOracle) Fail("graft.method", "method oracle is for benchmarks only");
  }
  if (const json* b = Field(*g, "budget")) {
    const int64_t budget = Integer(*b, "graft.budget");
    if (budget < 1 || budget > policy.max_budget) {
      Fail("graft.budget", "'graft.budget' must be in [1, " + std::to_string(policy.max_budget) + "] (got " +
                               std::to_string(budget) + "; the server's --max-budget sets the limit)");
    }
    out->decode.tree_budget = static_cast<int32_t>(budget);
  }
}

}  // namespace

nlohmann::json ErrorJson(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ParsedRequest ParseRequest(const std::string& text, Endpoint endpoint, const RequestPolicy& policy) {
  json body;
  std::vector<std::string> keys;  // the object keys on the path to the value being parsed
  try {
    body = json::parse(text, [&keys](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key) {
        keys.resize(std::max(0, depth - 1));
        keys.push_back(parsed.get<std::string>());
      }
      return true;
    });
  } catch (const json::parse_error& e) {
    Fail("", std::string("the body is not valid JSON: ") + e.what(), "invalid_json");
  } catch (const json::out_of_range& e) {  // a number no double holds, e.g. 1e309
    std::string param;
    for (const std::string& k : keys) param += (param.empty() ? "" : ".") + k;
    Fail(param, "'" + param + "' is a number out of range: " + e.what(), "invalid_value");
  }
  if (!body.is_object()) Fail("", "the body must be a JSON object", "invalid_json");

  ParsedRequest out;
  out.endpoint = endpoint;
  out.decode = policy.decode;
  out.sampling = policy.sampling;
  out.max_tokens = policy.default_max_tokens;

  // One model is served: any name selects it, as llama-server does (many clients and
  // tools hard-code one). Responses and /v1/models report the real one.
  if (const json* model = Field(body, "model")) String(*model, "model");
  if (endpoint == Endpoint::kCompletions) ParsePrompt(body, &out);
  else ParseMessages(body, &out);

  const json* max_tokens = Field(body, "max_tokens");
  const char* max_name = "max_tokens";
  if (endpoint == Endpoint::kChat && max_tokens == nullptr) {
    max_tokens = Field(body, "max_completion_tokens");
    max_name = "max_completion_tokens";
  }
  if (max_tokens != nullptr) {
    const int64_t n = Integer(*max_tokens, max_name);
    if (n < 1 || n > policy.max_tokens_limit) {
      Fail(max_name, std::string("'") + max_name + "' must be in [1, " + std::to_string(policy.max_tokens_limit) +
                         "] (got " + std::to_string(n) + "; the server's --max-tokens-limit sets the limit)");
    }
    out.max_tokens = static_cast<int32_t>(n);
  }
  if (const json* t = Field(body, "temperature")) {
    const double v = Number(*t, "temperature");
    if (!(v >= 0.0 && v <= 2.0)) Fail("temperature", "'temperature' must be in [0, 2]");
    out.sampling.temperature = static_cast<float>(v);
  }
  if (const json* p = Field(body, "top_p")) {
    const double v = Number(*p, "top_p");
    if (!(v >= 0.0 && v <= 1.0)) Fail("top_p", "'top_p' must be in [0, 1]");
    out.sampling.top_p = static_cast<float>(v);
  }
  if (const json* k = Field(body, "top_k")) {  // extension (llama.cpp servers accept it too)
    const int64_t v = Integer(*k, "top_k");
    if (v < 0 || v > INT32_MAX) Fail("top_k", "'top_k' must be >= 0 (0 = off)");
    out.sampling.top_k = static_cast<int>(v);
  }
  if (const json* s = Field(body, "seed")) {
    // Any 64-bit integer; a negative one is taken modulo 2^64 (as it always was).
    out.sampling.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(Integer(*s, "seed"));
  } else if (policy.fresh_seed) {
    out.sampling.seed = FreshSeed();
  }
  if (const json* n = Field(body, "n")) {
    if (Integer(*n, "n") != 1) Fail("n", "only n = 1 is supported", "unsupported_parameter");
  }
  if (const json* b = Field(body, "best_of")) {
    if (Integer(*b, "best_of") != 1) Fail("best_of", "only best_of = 1 is supported", "unsupported_parameter");
  }
  if (const json* e = Field(body, "echo")) {
    if (Bool(*e, "echo")) Fail("echo", "echo is not supported", "unsupported_parameter");
  }
  if (const json* l = Field(body, "logprobs")) {
    const bool on = l->is_boolean() ? l->get<bool>() : Integer(*l, "logprobs") != 0;
    if (on) Fail("logprobs", "logprobs are not supported", "unsupported_parameter");
  }
  RejectUnsupported(body);
  ParseStop(body, policy, &out);
  if (const json* s = Field(body, "stream")) out.stream = Bool(*s, "stream");
  out.cache_prompt = policy.cache_prompt;
  if (const json* c = Field(body, "cache_prompt")) out.cache_prompt = Bool(*c, "cache_prompt");
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) Fail("stream_options", "'stream_options' must be an object", "invalid_type");
    if (const json* u = Field(*so, "include_usage")) out.include_usage = Bool(*u, "stream_options.include_usage");
  }
  ParseGraft(body, policy, &out);
  return out;
}

nlohmann::json GraftStatsJson(const GenerationStats& st, Method m) { return StatsToJson(st, m); }

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

nlohmann::json CompletionJson(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
                              const Usage& usage, const nlohmann::json& graft_stats) {
  const bool chat = meta.endpoint == Endpoint::kChat;
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  return {{"id", meta.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", json::array({choice})},
          {"usage", UsageJson(usage)},
          {"graft", graft_stats}};
}

nlohmann::json ChunkJson(const ResponseMeta& meta, const std::string& delta, bool first,
                         const std::optional<std::string>& finish_reason) {
  const bool chat = meta.endpoint == Endpoint::kChat;
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}};
  if (chat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && !finish_reason)) d["content"] = delta;
    choice["delta"] = d;
  } else {
    choice["text"] = delta;
  }
  return {{"id", meta.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", json::array({choice})}};
}

std::string Dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace graft::server
