// Consumer of the installed graft package: loads a model, generates a few tokens
// with plain decoding (Method::kAr) and checks the result. Exit 0 = pass.
// Usage: graft_consumer MODEL.gguf
//
// It must compile without llama.cpp's include directory: graft's public headers
// never include llama.h, and graft::graft links llama privately.
#if __has_include(<llama.h>)
#error "llama.h is visible to a graft::graft consumer: graft's link interface leaks llama's include directory"
#endif

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "graft/backend.h"
#include "graft/engine.h"
#include "graft/error.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  try {
    std::unique_ptr<graft::Model> model = graft::Model::Load(argv[1]);
    graft::Engine engine(*model, /*draft=*/nullptr, {.n_ctx = 256, .n_threads = 2});
    graft::GenerateRequest request;
    request.prompt = model->Tokenize("The quick brown fox", /*add_special=*/true, /*parse_special=*/false);
    request.n_predict = 8;
    const graft::GenerateResult out = engine.Generate(request, {.method = graft::Method::kAr});

    std::printf("generated %zu tokens:", out.tokens.size());
    for (graft::Token t : out.tokens) std::printf(" %d", t);
    std::printf("\ntext: %s\n", model->Detokenize(out.tokens).c_str());

    // Greedy plain decoding: at most n_predict tokens, all in the vocabulary, and
    // the same tokens again from a second request on the same engine.
    const bool complete = out.tokens.size() == 8 || out.stats.stop_reason == "eog";
    if (out.tokens.size() > 8 || !complete || out.stats.n_generated != static_cast<int32_t>(out.tokens.size())) {
      std::fprintf(stderr, "FAIL: %zu tokens, stop reason \"%s\"\n", out.tokens.size(), out.stats.stop_reason.c_str());
      return 1;
    }
    for (graft::Token t : out.tokens) {
      if (t < 0 || t >= model->n_vocab()) {
        std::fprintf(stderr, "FAIL: token %d outside the vocabulary\n", t);
        return 1;
      }
    }
    if (engine.Generate(request, {.method = graft::Method::kAr}).tokens != out.tokens) {
      std::fprintf(stderr, "FAIL: greedy decoding of the same request gave different tokens\n");
      return 1;
    }
    std::printf("ok\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
