// What sharing draft passes across requests buys an EngineGroup (graft serve's
// engine), side by side in one run: the same requests, started together on as many
// slots, drafted in shared passes (DraftTogether) and then each in passes of its own.
// Usage:
//   group_bench TARGET.gguf DRAFT.gguf [slots=4] [method=chain] [n_predict=64] [threads=2]
// Prints, per mode, the wall time until every request finished, tokens per second in
// total, the draft passes run and the draft ms each request waited for, and checks
// that both modes emitted the same tokens (greedy; a difference can only come from a
// near-tie that batched kernels round differently).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "graft/engine.h"
#include "graft/error.h"

using namespace graft;

namespace {

// Short chat-style prompts: decoding, not prefill, dominates the run.
const char* kPrompts[] = {
    "Write a Python function that checks whether a string is a palindrome.",
    "Explain in three sentences why the sky is blue.",
    "Translate to German: The train leaves at seven and arrives at noon.",
    "List five uses of a binary search tree, one line each.",
    "Write a C function that reverses a linked list in place.",
    "Summarise the plot of Romeo and Juliet in a short paragraph.",
    "What is the derivative of x^3 * sin(x)? Show the steps.",
    "Write a SQL query that returns the ten most recent orders per customer.",
};

struct Run {
  double wall_s = 0;
  int64_t tokens = 0, draft_passes = 0, took_part = 0;
  double draft_ms = 0;  // summed over requests
  std::vector<std::vector<Token>> outputs;
};

Run RunGroup(const Model& target, const Model& draft, int32_t slots, Method method, int32_t n_predict,
             int32_t threads, bool share) {
  EngineConfig cfg;
  cfg.n_ctx = 1024;
  cfg.n_threads = threads;
  cfg.max_tree = 16;
  EngineGroup group(target, &draft, cfg, {.slots = slots, .share_draft_passes = share});
  for (int32_t s = 0; s < slots; ++s) {
    GenerateRequest req;
    const std::string text = kPrompts[s % (sizeof(kPrompts) / sizeof(kPrompts[0]))];
    req.prompt = target.Tokenize(target.ApplyChatTemplate({{"user", text}}, true), true, true);
    req.n_predict = n_predict;
    DecodeOptions o;
    o.method = method;
    o.tree_budget = 16;
    o.learn = false;
    group.Start(s, std::move(req), o);
  }
  Run run;
  run.outputs.resize(slots);
  const auto t0 = std::chrono::steady_clock::now();
  while (!group.idle()) {
    for (EngineGroup::Finished& f : group.Step()) {
      if (!f.error.empty()) throw Error("slot " + std::to_string(f.slot) + ": " + f.error);
      run.tokens += f.result.stats.n_generated;
      run.took_part += f.result.stats.n_draft_passes;
      run.draft_ms += f.result.stats.t_draft_ms;
      run.outputs[f.slot] = std::move(f.result.tokens);
    }
  }
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.draft_passes = group.draft_passes();
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s TARGET.gguf DRAFT.gguf [slots=4] [method=chain] [n_predict=64] [threads=2]\n", argv[0]);
    return 2;
  }
  try {
    const int32_t slots = argc > 3 ? std::atoi(argv[3]) : 4;
    const Method method = argc > 4 ? ParseMethod(argv[4]) : Method::kChain;
    const int32_t n_predict = argc > 5 ? std::atoi(argv[5]) : 64;
    const int32_t threads = argc > 6 ? std::atoi(argv[6]) : 2;
    if (slots < 1 || n_predict < 1 || threads < 1) throw Error("slots, n_predict and threads must be at least 1");
    SetBackendVerbose(false);
    auto target = Model::Load(argv[1]);
    auto draft = Model::Load(argv[2]);
    printf("%d requests of %d tokens on %d slots, method %s, %d threads\n", slots, n_predict, slots,
           MethodName(method).c_str(), threads);
    printf("%-8s %8s %8s %10s %12s %14s\n", "drafts", "wall s", "tokens", "tokens/s", "draft passes",
           "draft ms/req");
    RunGroup(*target, *draft, slots, method, 8, threads, true);  // warm-up: pages the weights in
    const Run shared = RunGroup(*target, *draft, slots, method, n_predict, threads, true);
    const Run alone = RunGroup(*target, *draft, slots, method, n_predict, threads, false);
    for (const auto& [name, r] : {std::pair<const char*, const Run&>{"shared", shared}, {"alone", alone}}) {
      printf("%-8s %8.2f %8lld %10.2f %12lld %14.0f\n", name, r.wall_s, static_cast<long long>(r.tokens),
             r.tokens / r.wall_s, static_cast<long long>(r.draft_passes), r.draft_ms / slots);
    }
    printf("shared / alone: %.2fx tokens/s\n", (shared.tokens / shared.wall_s) / (alone.tokens / alone.wall_s));
    int32_t differ = 0;
    for (int32_t s = 0; s < slots; ++s) differ += shared.outputs[s] != alone.outputs[s];
    printf("outputs: %d of %d requests differ between the modes%s\n", differ, slots,
           differ ? " (near-ties of batched kernels)" : "");
  } catch (const std::exception& e) {
    fprintf(stderr, "group_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
