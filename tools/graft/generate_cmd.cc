// graft generate: one prompt, one method (or --compare: ar and the method side by side).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_options.h"
#include "commands.h"
#include "graft/error.h"
#include "graft/stats_json.h"

namespace graft::cli {
namespace {

struct GenerateFlags {
  ModelFlags models;
  DecodeFlags decode;
  LearnedFlags learned;
  std::string prompt;
  std::string prompt_file;
  std::string system;
  int32_t n_predict = 128;
  bool raw = false;
  bool json = false;
  bool compare = false;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read prompt file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunGenerate(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_file.empty()) throw Error("give exactly one of -p PROMPT or -f FILE");
  if (f.n_predict < 1) throw Error("-n must be at least 1 (got " + std::to_string(f.n_predict) + ")");
  const std::string text = f.prompt_file.empty() ? f.prompt : ReadFile(f.prompt_file);
  if (text.empty()) throw Error("the prompt is empty");

  LoadedModels lm = LoadModelFiles(f.models);
  EngineConfig ec = MakeEngineConfig(f.models, std::max(f.decode.tree_budget, 1));
  ec.learned_state = f.learned.PathFor(f.models, *lm.target, lm.draft.get());
  lm.engine = std::make_unique<Engine>(*lm.target, lm.draft.get(), ec);
  DecodeOptions opts = f.decode.ToOptions(lm.draft != nullptr);
  lm.engine->Validate(opts);

  GenerateRequest req;
  try {
    req.prompt = EncodePrompt(*lm.target, text, f.system, f.raw);
  } catch (const Error&) {
    if (f.prompt_file.empty()) throw;
    // The chat template moves the file's bytes; tokenizing the file alone names the
    // file and an offset in it. If the file alone is fine, the system prompt was not.
    try {
      lm.target->Tokenize(text, /*add_special=*/false, /*parse_special=*/false);
    } catch (const Error& in_file) {
      throw Error(f.prompt_file + ": " + in_file.what());
    }
    throw;
  }
  req.n_predict = f.n_predict;
  req.sampling = f.decode.ToSampling();
  if (static_cast<int32_t>(req.prompt.size()) >= f.models.ctx) {
    throw Error("prompt is " + std::to_string(req.prompt.size()) + " tokens but the context holds " +
                std::to_string(f.models.ctx) + " (raise -c or shorten the prompt)");
  }

  // --compare: a short warm-up (pages the weights in), then the method, then ar.
  // ar runs last with learning off so the method cannot retrieve ar's output from
  // the history index: the speedup is what a first request sees.
  const bool compare = f.compare && opts.method != Method::kAr;
  DecodeOptions ar = opts;
  ar.method = Method::kAr;
  ar.learn = false;
  if (compare) {
    GenerateRequest warm = req;
    warm.n_predict = std::min(req.n_predict, 4);
    lm.engine->Generate(warm, ar);
  }
  const bool stream = !f.json;
  std::string streamed;
  if (stream) {
    req.on_tokens = [&](const std::vector<Token>& toks) {
      for (Token t : toks) {
        const std::string piece = lm.target->TokenToPiece(t);
        fwrite(piece.data(), 1, piece.size(), stdout);
      }
      fflush(stdout);
      return true;
    };
  }
  GenerateResult res = lm.engine->Generate(req, opts);
  try {
    lm.engine->SaveLearned();
  } catch (const Error& e) {
    fprintf(stderr, "graft: warning: %s\n", e.what());
  }
  GenerateResult base;
  if (compare) {
    req.on_tokens = nullptr;
    base = lm.engine->Generate(req, ar);
  }
  const std::string out_text = lm.target->Detokenize(res.tokens);
  if (f.json) {
    nlohmann::json j = {{"text", out_text}, {"tokens", res.tokens}, {"stats", StatsToJson(res.stats, opts.method)},
                        {"target", lm.target->path()}, {"draft", lm.draft ? lm.draft->path() : ""},
                        {"llama_cpp", LlamaBuildInfo()}};
    if (compare) {
      j["ar"] = StatsToJson(base.stats, Method::kAr);
      j["speedup"] = base.stats.decode_tps() > 0 ? res.stats.decode_tps() / base.stats.decode_tps() : 0;
      j["identical_to_ar"] = base.tokens == res.tokens;
    }
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return 0;
  }
  printf("\n\n");
  printf("%s\n", FormatStats(res.stats, opts.method).c_str());
  if (req.sampling.temperature > 0) {  // the JSON form says it as stats.seed
    printf("sampled with seed %llu: -s %llu writes this text again, with any --method\n",
           static_cast<unsigned long long>(res.stats.seed), static_cast<unsigned long long>(res.stats.seed));
  }
  if (compare) {
    printf("%s\n", FormatStats(base.stats, Method::kAr).c_str());
    const double speedup = base.stats.decode_tps() > 0 ? res.stats.decode_tps() / base.stats.decode_tps() : 0;
    printf("speedup: %s %.2fx over ar (%.1f vs %.1f t/s), tau %.2f, output %s ar's\n",
           MethodName(opts.method).c_str(), speedup, res.stats.decode_tps(), base.stats.decode_tps(),
           res.stats.tau(), base.tokens == res.tokens ? "identical to" : "DIFFERS from");
  }
  return 0;
}

}  // namespace

std::vector<Token> EncodePrompt(const Model& model, const std::string& text, const std::string& system, bool raw) {
  if (raw) return model.Tokenize(text, /*add_special=*/true, /*parse_special=*/false);
  std::vector<ChatMessage> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  msgs.push_back({"user", text});
  const std::string formatted = model.ApplyChatTemplate(msgs, /*add_assistant=*/true);
  return model.Tokenize(formatted, /*add_special=*/true, /*parse_special=*/true);
}

void AddGenerateCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* sub = app.add_subcommand("generate", "generate text from a prompt");
  flags->models.Add(sub);
  flags->decode.Add(sub);
  flags->learned.Add(sub);
  sub->add_option("-p,--prompt", flags->prompt, "prompt text");
  sub->add_option("-f,--file", flags->prompt_file, "read the prompt from a file");
  sub->add_option("--system", flags->system, "system message (chat template)");
  sub->add_option("-n,--n-predict", flags->n_predict, "new tokens to generate (>= 1)");
  sub->add_flag("--raw", flags->raw, "use the prompt as is, without the model's chat template");
  sub->add_flag("--json", flags->json, "print one JSON object (text, tokens, stats)");
  sub->add_flag("--compare", flags->compare, "also run ar (after the method, learning off) and print the speedup");
  sub->callback([flags, run] { *run = [flags] { return RunGenerate(*flags); }; });
}

}  // namespace graft::cli
