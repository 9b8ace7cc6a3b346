#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>
#include "graft/backend.h"
#include "graft/sampling.h"
using namespace graft;
static double Median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
struct T {
  const Model& m; std::unique_ptr<Context> ctx; std::mt19937 rng; int32_t base = 0; Token last = 0;
  T(const Model& m_, bool lazy) : m(m_), rng(7) {
    ContextOptions co; co.n_ctx = 1024; co.n_threads = 2; co.n_seq_max = 64; co.max_tree = 64; co.lazy_logits = lazy;
    ctx = std::make_unique<Context>(m, co);
    std::vector<Token> p(256); for (auto& t : p) t = Tok(); ctx->Prefill(p, false); base = ctx->n_past(); last = p.back();
    ctx->Prefill(std::vector<Token>{last}, true); ctx->Truncate(base);  // the 1-row check
  }
  Token Tok() { return std::uniform_int_distribution<int32_t>(100, m.n_vocab() - 1)(rng); }
  TokenTree Tree(int32_t n) {
    TokenTree t; t.Reset(last);
    while (t.size() < n) { int32_t p = rng() % t.size(); Token x = Tok(); if (t.depth[p] < 8 && t.FindChild(p, x) < 0) t.Add(p, x, 0.5f, Source::kDraft); }
    return t;
  }
  double Pass(const TokenTree& t, int32_t read) {
    auto t0 = std::chrono::steady_clock::now(); ctx->EvalTree(t);
    float s = 0; for (int i = 0; i < read; ++i) s += ctx->Logits(i)[0];
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ctx->CommitPath({0}); ctx->Truncate(base); return ms + s * 0;
  }
};
int main(int argc, char** argv) {
  auto model = Model::Load(argv[1]);
  T a(*model, false), b(*model, true);
  // correctness on a 16-node tree
  TokenTree t = a.Tree(16);
  a.ctx->EvalTree(t); b.ctx->EvalTree(t);
  printf("lazy pass: %d\n", b.ctx->lazy_pass());
  const int nv = model->n_vocab();
  for (int i = 0; i < 16; ++i) {
    const float* x = a.ctx->Logits(i); const float* y = b.ctx->Logits(i);
    double md = 0; for (int k = 0; k < nv; ++k) md = std::max(md, (double)std::fabs(x[k] - y[k]));
    printf("row %d: bitwise %d maxdiff %.3g argmax %d %d\n", i, memcmp(x, y, nv * 4) == 0, md, Argmax(x, nv), Argmax(y, nv));
  }
  std::vector<std::vector<float>> seq(16);
  for (int i = 0; i < 16; ++i) seq[i].assign(b.ctx->Logits(i), b.ctx->Logits(i) + nv);
  a.ctx->CommitPath({0}); a.ctx->Truncate(a.base); b.ctx->CommitPath({0}); b.ctx->Truncate(b.base);
  int same = 0;
  for (int i = 0; i < 16; ++i) { b.ctx->EvalTree(t); same += memcmp(b.ctx->Logits(i), seq[i].data(), nv * 4) == 0; b.ctx->CommitPath({0}); b.ctx->Truncate(b.base); }
  printf("rows read alone equal to rows read in blocks: %d of 16\n", same);
  if (argc > 4) {
    std::vector<double> x, y;
    for (int r = 0; r < 40; ++r) {
      auto d = [&](T& c) { auto t0 = std::chrono::steady_clock::now(); c.ctx->Prefill(std::vector<Token>{c.last}, true);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); c.ctx->Truncate(c.base); return ms; };
      for (int i = 0; i < 5; ++i) x.push_back(d(a));
      for (int i = 0; i < 5; ++i) y.push_back(d(b));
    }
    printf("decode: full %.2f lazy-context %.2f ms\n", Median(x), Median(y));
    return 0;
  }
  if (argc > 3) {
    for (int r = 0; r < 5; ++r) {
      TokenTree tt = b.Tree(8);
      auto t0 = std::chrono::steady_clock::now(); b.ctx->EvalTree(tt);
      auto t1 = std::chrono::steady_clock::now(); b.ctx->Logits(0);
      auto t2 = std::chrono::steady_clock::now(); b.ctx->Logits(1);
      auto t3 = std::chrono::steady_clock::now();
      auto ms = [](auto x, auto y) { return std::chrono::duration<double, std::milli>(y - x).count(); };
      printf("pass %.1f, row 0 %.1f, row 1 %.1f\n", ms(t0, t1), ms(t1, t2), ms(t2, t3));
      b.ctx->CommitPath({0}); b.ctx->Truncate(b.base);
    }
    return 0;
  }
  if (argc > 2) {
    for (int n : {1, 2, 4, 8, 16}) {
      for (int read : {1, 3, n}) {
        if (read > n) continue;
        std::vector<double> x, y;
        for (int r = 0; r < 7; ++r) { TokenTree tt = a.Tree(n); a.Pass(tt, read); x.push_back(a.Pass(tt, read)); b.Pass(tt, read); y.push_back(b.Pass(tt, read)); }
        printf("n %2d read %d: full %.1f lazy %.1f ms (%.2f)\n", n, read, Median(x), Median(y), Median(y) / Median(x));
      }
    }
  }
}
// (timing of single reads appended below)
