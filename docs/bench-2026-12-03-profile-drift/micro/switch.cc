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
  auto m = Model::Load(argv[1]);
  ContextOptions co; co.n_ctx = atoi(argv[2]); co.n_threads = 2; co.n_seq_max = 64; co.max_tree = 64; co.lazy_logits = true;
  Context ctx(*m, co);
  std::mt19937 rng(7);
  auto Tok = [&] { return std::uniform_int_distribution<int32_t>(100, m->n_vocab() - 1)(rng); };
  std::vector<Token> p(256); for (auto& t : p) t = Tok(); ctx.Prefill(p, false);
  Token last = p.back();
  int32_t base = ctx.n_past();
  ctx.Prefill(std::vector<Token>{last}, true); ctx.Truncate(base);
  auto Tree = [&](int n) { TokenTree t; t.Reset(last); while (t.size() < n) { int32_t q = t.size() - 1; t.Add(q, Tok(), 0.5f, Source::kDraft); } return t; };
  // each pass: eval, read root, commit root (grows context by 1 like decoding)
  auto Pass = [&](int n) {
    TokenTree t = Tree(n);
    auto t0 = std::chrono::steady_clock::now();
    ctx.EvalTree(t); volatile float s = ctx.Logits(0)[0]; (void)s;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ctx.CommitPath({0}); last = Tok();
    ctx.Truncate(base);
    return ms;
  };
  // patterns: label -> sequence; time each position's size in context of previous
  if (argc > 3) {  // "large": a 1-row pass after 4, 18 and 32 rows (switch2 of the README)
    std::vector<double> s11, s1_4, s1_18, s1_32, s2_1;
    for (int r = 0; r < 30; ++r) {
      Pass(1); s11.push_back(Pass(1));
      Pass(4); s1_4.push_back(Pass(1));
      s2_1.push_back(Pass(2));
      Pass(18); s1_18.push_back(Pass(1));
      Pass(32); s1_32.push_back(Pass(1));
    }
    printf("1 after 1: %.2f\n1 after 4: %.2f\n1 after 18: %.2f\n1 after 32: %.2f\n2 after 1: %.2f\n", Median(s11),
           Median(s1_4), Median(s1_18), Median(s1_32), Median(s2_1));
    return 0;
  }
  std::vector<double> s11, s21, s12, s22, s13, s31, s32, s23;
  for (int r = 0; r < 40; ++r) {
    Pass(1); s11.push_back(Pass(1)); s11.push_back(Pass(1));
    s12.push_back(Pass(2)); s21.push_back(Pass(1)); s11.push_back(Pass(1));
    Pass(2); s22.push_back(Pass(2));
    s23.push_back(Pass(3)); s32.push_back(Pass(2)); s13.push_back(0);
    Pass(1); s13.back() = Pass(3); s31.push_back(Pass(1));
  }
  printf("1 after 1: %.2f\n1 after 2: %.2f\n1 after 3: %.2f\n2 after 1: %.2f\n2 after 2: %.2f\n2 after 3: %.2f\n3 after 1: %.2f\n3 after 2: %.2f\n",
         Median(s11), Median(s21), Median(s31), Median(s12), Median(s22), Median(s32), Median(s13), Median(s23));
}
