#include "server/openai_api.h"

#include <gtest/gtest.h>

namespace graft::server {
namespace {

using nlohmann::json;

RequestPolicy Policy() {
  RequestPolicy p;
  p.model_names = {"tiny-target", "graft"};
  p.decode.method = Method::kGraft;
  p.decode.tree_budget = 16;
  p.sampling.seed = 42;
  p.fresh_seed = false;  // `graft serve -s 42`
  p.default_max_tokens = 32;
  p.max_tokens_limit = 100;
  p.max_budget = 64;
  return p;
}

// The ApiError a body gets, or a failure if it parses.
ApiError ErrorOf(const std::string& body, Endpoint ep = Endpoint::kCompletions) {
  try {
    ParseRequest(body, ep, Policy());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(OpenAiApiTest, CompletionDefaultsFromPolicy) {
  ParsedRequest r = ParseRequest(R"({"prompt": "hi"})", Endpoint::kCompletions, Policy());
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_EQ(r.decode.method, Method::kGraft);
  EXPECT_EQ(r.decode.tree_budget, 16);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.cache_prompt);
  // llama-server's cache_prompt, defaulting to the server's --cache-prompt.
  RequestPolicy cached = Policy();
  cached.cache_prompt = true;
  EXPECT_TRUE(ParseRequest(R"({"prompt": "hi"})", Endpoint::kCompletions, cached).cache_prompt);
  EXPECT_FALSE(ParseRequest(R"({"prompt": "hi", "cache_prompt": false})", Endpoint::kCompletions, cached).cache_prompt);
  EXPECT_TRUE(ParseRequest(R"({"prompt": "hi", "cache_prompt": true})", Endpoint::kCompletions, Policy()).cache_prompt);
}

TEST(OpenAiApiTest, CompletionAllOptions) {
  ParsedRequest r = ParseRequest(
      R"({"model": "graft", "prompt": ["hi"], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3,
          "stop": ["a", "b"], "stream": true, "stream_options": {"include_usage": true},
          "graft": {"method": "ar", "budget": 4}, "user": "ignored", "n": 1})",
      Endpoint::kCompletions, Policy());
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.seed, 3u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.decode.method, Method::kAr);
  EXPECT_EQ(r.decode.tree_budget, 4);
}

// Without "seed" a request gets a fresh one (unless the server was given -s); with one,
// any 64-bit integer, the seed runs as given (a negative one modulo 2^64).
TEST(OpenAiApiTest, SeedGivenOrFresh) {
  RequestPolicy fresh = Policy();
  fresh.fresh_seed = true;
  const uint64_t a = ParseRequest(R"({"prompt": "hi"})", Endpoint::kCompletions, fresh).sampling.seed;
  const uint64_t b = ParseRequest(R"({"prompt": "hi"})", Endpoint::kCompletions, fresh).sampling.seed;
  EXPECT_NE(a, b);
  EXPECT_LT(a, uint64_t{1} << 53);  // exact in a JSON reader's double
  EXPECT_EQ(ParseRequest(R"({"prompt": "hi", "seed": 7})", Endpoint::kCompletions, fresh).sampling.seed, 7u);
  EXPECT_EQ(ParseRequest(R"({"prompt": "hi"})", Endpoint::kCompletions, Policy()).sampling.seed, 42u);
  EXPECT_EQ(ParseRequest(R"({"prompt": "hi", "seed": 18446744073709551615})", Endpoint::kCompletions, fresh)
                .sampling.seed,
            UINT64_MAX);
  EXPECT_EQ(ParseRequest(R"({"prompt": "hi", "seed": -1})", Endpoint::kCompletions, fresh).sampling.seed, UINT64_MAX);
  EXPECT_EQ(ErrorOf(R"({"prompt": "hi", "seed": 1.5})").param, "seed");
  // The seed that ran is reported in the graft stats object.
  GenerationStats st;
  st.seed = a;
  EXPECT_EQ(GraftStatsJson(st, Method::kGraft)["seed"].get<uint64_t>(), a);
}

TEST(OpenAiApiTest, PromptAsTokenIdsAndStopAsString) {
  ParsedRequest r = ParseRequest(R"({"prompt": [1, 2, 3], "stop": "x"})", Endpoint::kCompletions, Policy());
  EXPECT_EQ(r.prompt_tokens, (std::vector<Token>{1, 2, 3}));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x"}));
}

TEST(OpenAiApiTest, ChatMessages) {
  ParsedRequest r = ParseRequest(
      R"({"messages": [{"role": "developer", "content": "be brief"},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 5})",
      Endpoint::kChat, Policy());
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.max_tokens, 5);
}

// One model is served, so any name selects it (clients hard-code "gpt-4o" and the like).
TEST(OpenAiApiTest, AnyModelNameSelectsTheServedModel) {
  for (const char* name : {"tiny-target", "graft", "gpt-4o", ""}) {
    const std::string body = std::string(R"({"prompt": "x", "model": ")") + name + "\"}";
    EXPECT_NO_THROW(ParseRequest(body, Endpoint::kCompletions, Policy())) << name;
  }
}

TEST(OpenAiApiTest, BadInputNamesTheParameter) {
  struct Case {
    const char* body;
    Endpoint ep;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {"{not json", Endpoint::kCompletions, 400, ""},
      {"[1, 2]", Endpoint::kCompletions, 400, ""},
      {R"({"max_tokens": 4})", Endpoint::kCompletions, 400, "prompt"},
      {R"({"prompt": 5})", Endpoint::kCompletions, 400, "prompt"},
      {R"({"prompt": ["a", "b"]})", Endpoint::kCompletions, 400, "prompt"},
      {R"({"prompt": "x", "max_tokens": "many"})", Endpoint::kCompletions, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0})", Endpoint::kCompletions, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 101})", Endpoint::kCompletions, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 2.5})", Endpoint::kCompletions, 400, "max_tokens"},
      {R"({"prompt": "x", "temperature": -0.1})", Endpoint::kCompletions, 400, "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", Endpoint::kCompletions, 400, "temperature"},
      {R"({"prompt": "x", "top_p": 1.5})", Endpoint::kCompletions, 400, "top_p"},
      {R"({"prompt": "x", "stop": 3})", Endpoint::kCompletions, 400, "stop"},
      {R"({"prompt": "x", "stop": [""]})", Endpoint::kCompletions, 400, "stop"},
      {R"({"prompt": "x", "stream": "yes"})", Endpoint::kCompletions, 400, "stream"},
      {R"({"prompt": "x", "cache_prompt": 1})", Endpoint::kCompletions, 400, "cache_prompt"},
      {R"({"prompt": "x", "temperature": 1e309})", Endpoint::kCompletions, 400, "temperature"},
      {R"({"prompt": "x", "graft": {"budget": -1e400}})", Endpoint::kCompletions, 400, "graft.budget"},
      {R"({"prompt": "x", "max_tokens": 99999999999999999999999})", Endpoint::kCompletions, 400, "max_tokens"},
      {R"({"prompt": "x", "model": 7})", Endpoint::kCompletions, 400, "model"},
      {R"({"prompt": "x", "n": 2})", Endpoint::kCompletions, 400, "n"},
      {R"({"prompt": "x", "graft": {"method": "magic"}})", Endpoint::kCompletions, 400, "graft.method"},
      {R"({"prompt": "x", "graft": {"budget": 0}})", Endpoint::kCompletions, 400, "graft.budget"},
      {R"({"prompt": "x", "graft": {"budjet": 4}})", Endpoint::kCompletions, 400, "graft.budjet"},
      {R"({"prompt": "x", "graft": "fast"})", Endpoint::kCompletions, 400, "graft"},
      {R"({"prompt": "x"})", Endpoint::kChat, 400, "messages"},
      {R"({"messages": []})", Endpoint::kChat, 400, "messages"},
      {R"({"messages": [{"role": "user"}]})", Endpoint::kChat, 400, "messages[0].content"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", Endpoint::kChat, 400, "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", Endpoint::kChat, 400,
       "messages[0].content[0].type"},
  };
  for (const Case& c : cases) {
    ApiError e = ErrorOf(c.body, c.ep);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty()) << c.body;
    const json j = ErrorJson(e);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code") && j["error"].contains("message"));
  }
}

// Knobs graft does not implement: accepted at their no-op values (clients send
// defaults), a 400 "unsupported_parameter" naming the knob otherwise; never a 200 whose
// text ignored them.
TEST(OpenAiApiTest, UnsupportedKnobsAreRefusedUnlessNoOps) {
  const char* accepted[] = {
      R"({"prompt": "x", "presence_penalty": 0, "frequency_penalty": 0.0, "repeat_penalty": 1, "min_p": 0,
          "typical_p": 1, "logit_bias": {}, "top_logprobs": 0, "tools": [], "functions": null,
          "response_format": {"type": "text"}, "suffix": ""})",
  };
  for (const char* body : accepted) EXPECT_NO_THROW(ParseRequest(body, Endpoint::kCompletions, Policy())) << body;
  const std::pair<const char*, const char*> refused[] = {
      {R"({"prompt": "x", "presence_penalty": 0.5})", "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": -1})", "frequency_penalty"},
      {R"({"prompt": "x", "repeat_penalty": 1.1})", "repeat_penalty"},
      {R"({"prompt": "x", "min_p": 0.05})", "min_p"},
      {R"({"prompt": "x", "typical_p": 0.9})", "typical_p"},
      {R"({"prompt": "x", "logit_bias": {"50256": -100}})", "logit_bias"},
      {R"({"prompt": "x", "top_logprobs": 3})", "top_logprobs"},
      {R"({"prompt": "x", "tools": [{"type": "function"}]})", "tools"},
      {R"({"prompt": "x", "functions": [{"name": "f"}]})", "functions"},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}})", "response_format.type"},
      {R"({"prompt": "x", "suffix": "}"})", "suffix"},
  };
  for (const auto& [body, param] : refused) {
    const ApiError e = ErrorOf(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body;
    EXPECT_EQ(e.code, "unsupported_parameter") << body;
    EXPECT_NE(e.message.find("not supported"), std::string::npos) << e.message;
  }
  // A knob of the wrong type is still a type error.
  EXPECT_EQ(ErrorOf(R"({"prompt": "x", "min_p": "low"})").code, "invalid_type");
}

TEST(OpenAiApiTest, ResponseShapes) {
  ResponseMeta meta{Endpoint::kChat, "chatcmpl-1", 123, "tiny-target"};
  json full = CompletionJson(meta, "hello", "stop", {5, 2}, json::object());
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(full["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(full["usage"]["total_tokens"], 7);
  EXPECT_EQ(full["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // --cache-prompt: OpenAI's field for the prompt tokens a cache already held.
  EXPECT_EQ(CompletionJson(meta, "hi", "stop", {5, 2, 3}, json::object())["usage"]["prompt_tokens_details"]
                          ["cached_tokens"],
            3);
  json first = ChunkJson(meta, "", true, std::nullopt);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  json last = ChunkJson(meta, "", false, std::string("length"));
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  meta.endpoint = Endpoint::kCompletions;
  json text = ChunkJson(meta, "ab", false, std::nullopt);
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "ab");
}

TEST(OpenAiApiTest, DumpReplacesInvalidUtf8) {
  EXPECT_EQ(Dump(json("a\xE2\x82")), "\"a\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace graft::server
