#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>
#include "graft/backend.h"
using namespace graft;
static double Q(std::vector<double> v, double q) { std::sort(v.begin(), v.end()); return v[(size_t)(q * (v.size() - 1))]; }
int main(int argc, char** argv) {
  auto m = Model::Load(argv[1]);
  ContextOptions co; co.n_ctx = 304; co.n_threads = 2; co.n_seq_max = 32; co.max_tree = 32; co.lazy_logits = true;
  Context ctx(*m, co);
  std::mt19937 rng(7);
  auto Tok = [&] { return std::uniform_int_distribution<int32_t>(100, m->n_vocab() - 1)(rng); };
  std::vector<Token> p(256); for (auto& t : p) t = Tok(); ctx.Prefill(p, false);
  int32_t base = ctx.n_past();
  ctx.Prefill(std::vector<Token>{Tok()}, true); ctx.Truncate(base);
  auto Pass = [&](int n) {
    TokenTree t; t.Reset(Tok()); while (t.size() < n) { int32_t q = rng() % t.size(); t.Add(q, Tok(), 0.5f, Source::kDraft); }
    auto t0 = std::chrono::steady_clock::now();
    ctx.EvalTree(t); volatile float s = ctx.Logits(0)[0]; (void)s;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ctx.CommitPath({0}); ctx.Truncate(base);
    return ms;
  };
  Pass(32); Pass(1);
  int rounds = atoi(argv[2]);
  std::vector<std::vector<double>> s(5), r(5);
  for (int k = 0; k < rounds; ++k) {
    double t[5];
    for (int n = 1; n <= 4; ++n) { t[n] = Pass(n); s[n].push_back(t[n]); }
    for (int n = 2; n <= 4; ++n) r[n].push_back(t[n] / t[1]);
    if (k % 3 == 2) Pass(16);
  }
  for (int n = 1; n <= 4; ++n) printf("n=%d min %.1f p20 %.1f med %.1f p80 %.1f | ratio(min) %.2f ratio(p20) %.2f ratio(med) %.2f paired med %.2f p80 %.2f\n", n, Q(s[n],0), Q(s[n],.2), Q(s[n],.5), Q(s[n],.8),
    Q(s[n],0)/Q(s[1],0), Q(s[n],.2)/Q(s[1],.2), Q(s[n],.5)/Q(s[1],.5), n>1?Q(r[n],.5):1.0, n>1?Q(r[n],.8):1.0);
}
