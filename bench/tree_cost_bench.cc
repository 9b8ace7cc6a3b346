// Cost of one target pass over a tree of N nodes, the curve that decides the tree
// budget on a machine. Usage:
//   tree_cost_bench MODEL.gguf [threads=2] [reps=7] [prefix=256] [sizes=1,2,4,8,16,32,64]
// Prints, per N in {1, 2, 4, 8, 16, 32, 64}, the median ms of EvalTree + commit of the
// root (so the cache does not grow), and the ratio to N = 1; beside it the same N rows
// as a prefill chunk that asks for the last row's logits only (what llama-bench's ppN
// times: the output layer runs once), so the difference is the output layer's share;
// then plain greedy decode tokens/s over 64 tokens.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "graft/backend.h"
#include "graft/sampling.h"

using namespace graft;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A bushy random tree of n nodes, depth <= 8 (like a draft tree).
TokenTree RandomTree(std::mt19937& rng, Token root, int32_t n, int32_t vocab) {
  TokenTree t;
  t.Reset(root);
  std::uniform_int_distribution<int32_t> tok(100, vocab - 1);
  while (t.size() < n) {
    const int32_t p = std::uniform_int_distribution<int32_t>(0, t.size() - 1)(rng);
    if (t.depth[p] >= 8) continue;
    const Token x = tok(rng);
    if (t.FindChild(p, x) < 0) t.Add(p, x, 0.5f, Source::kDraft);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [threads=2] [reps=7] [prefix=256]\n", argv[0]);
    return 2;
  }
  const int threads = argc > 2 ? atoi(argv[2]) : 2;
  const int reps = argc > 3 ? atoi(argv[3]) : 7;
  const int prefix_len = argc > 4 ? atoi(argv[4]) : 256;
  std::vector<int32_t> sizes = {1, 2, 4, 8, 16, 32, 64};
  if (argc > 5) {
    sizes.clear();
    for (const char* p = argv[5]; *p != '\0';) {
      char* end = nullptr;
      sizes.push_back(static_cast<int32_t>(strtol(p, &end, 10)));
      p = *end == ',' ? end + 1 : end;
    }
  }
  auto model = Model::Load(argv[1]);
  ContextOptions co;
  co.n_ctx = 2048;
  co.n_threads = threads;
  co.max_tree = 64;
  co.n_seq_max = 64;
  Context ctx(*model, co);
  std::mt19937 rng(1);
  std::vector<Token> prefix(prefix_len);
  for (auto& t : prefix) t = std::uniform_int_distribution<int32_t>(100, model->n_vocab() - 1)(rng);
  ctx.Prefill(prefix, false);
  const int32_t base = ctx.n_past();
  printf("model %s (%s), %d threads, prefix %d tokens, median of %d\n", model->Name().c_str(),
         model->Description().c_str(), threads, prefix_len, reps);
  printf("%6s %10s %8s %14s %8s\n", "N", "ms/pass", "x N=1", "ms/1 logit row", "x N=1");
  double one = 0, one_chunk = 0;  // ms at the first size (normally N = 1)
  for (int32_t n : sizes) {
    std::vector<double> ms, chunk_ms;
    for (int r = 0; r < reps + 1; ++r) {
      TokenTree tree = RandomTree(rng, prefix.back(), n, model->n_vocab());
      const auto t0 = std::chrono::steady_clock::now();
      ctx.EvalTree(tree);
      ctx.Logits(n - 1);
      const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ctx.CommitPath({0});
      ctx.Truncate(base);
      if (r > 0) ms.push_back(dt);  // first one warms up this batch shape
      const auto t1 = std::chrono::steady_clock::now();
      ctx.Prefill(tree.token, true);  // the same tokens as one causal chunk
      const double dc = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
      ctx.Truncate(base);
      if (r > 0) chunk_ms.push_back(dc);
    }
    const double m = Median(ms), mc = Median(chunk_ms);
    if (one == 0) one = m, one_chunk = mc;
    printf("%6d %10.2f %8.2f %14.2f %8.2f\n", n, m, m / one, mc, mc / one_chunk);
  }
  // Plain greedy decoding speed.
  ctx.Truncate(base);
  Token t = prefix.back();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 64; ++i) t = Argmax(ctx.Prefill(std::vector<Token>{t}, true), model->n_vocab());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("plain greedy decode: %.2f tokens/s\n", 64 / s);
  return 0;
}
