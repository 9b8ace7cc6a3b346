#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>
#include "graft/backend.h"
using namespace graft;
static double Median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char** argv) {
  auto model = Model::Load(argv[1]);
  ContextOptions co; co.n_ctx = 1024; co.n_threads = 2; co.n_seq_max = 64; co.max_tree = 64; co.lazy_logits = true;
  Context ctx(*model, co);
  std::mt19937 rng(3);
  auto tok = [&] { return std::uniform_int_distribution<int32_t>(100, model->n_vocab() - 1)(rng); };
  std::vector<Token> p(256); for (auto& t : p) t = tok();
  ctx.Prefill(p, false); ctx.Prefill(std::vector<Token>{tok()}, true); ctx.Truncate(256);
  const int n = 16;
  std::vector<double> fwd, bwd, one;
  for (int r = 0; r < 7; ++r) {
    for (int mode = 0; mode < 3; ++mode) {
      TokenTree t; t.Reset(tok()); while (t.size() < n) t.Add(t.size() - 1, tok(), 0.5f, Source::kDraft);
      ctx.EvalTree(t);
      auto t0 = std::chrono::steady_clock::now();
      if (mode == 0) for (int i = 0; i < n; ++i) ctx.Logits(i);
      if (mode == 1) for (int i = n - 1; i >= 0; --i) ctx.Logits(i);
      if (mode == 2) ctx.Logits(0);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      (mode == 0 ? fwd : mode == 1 ? bwd : one).push_back(ms);
      ctx.CommitPath({0}); ctx.Truncate(256);
    }
  }
  printf("lazy pass %d; 16 rows: forward (blocks 1,2,4,8,1) %.1f ms, backward (16 singles) %.1f ms; one row %.1f ms\n", 1, Median(fwd), Median(bwd), Median(one));
}
