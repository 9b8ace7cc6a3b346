#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>
#include "graft/backend.h"
using namespace graft;
static double Median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
struct C {
  std::unique_ptr<Context> ctx; int32_t base; std::mt19937 rng{7}; const Model& m;
  C(const Model& m_, int seqs, int tree, int nctx, bool lazy) : m(m_) {
    ContextOptions co; co.n_ctx = nctx; co.n_threads = 2; co.n_seq_max = seqs; co.max_tree = tree; co.lazy_logits = lazy;
    ctx = std::make_unique<Context>(m, co);
    std::vector<Token> p(200); for (auto& t : p) t = Tok(); ctx->Prefill(p, false); base = ctx->n_past();
  }
  Token Tok() { return std::uniform_int_distribution<int32_t>(100, m.n_vocab() - 1)(rng); }
  double Pass() {
    TokenTree t; t.Reset(Tok());
    auto t0 = std::chrono::steady_clock::now();
    ctx->EvalTree(t); volatile float s = ctx->Logits(0)[0]; (void)s;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ctx->CommitPath({0});
    if (ctx->n_past() > base + 150) ctx->Truncate(base);
    return ms;
  }
};
int main(int argc, char** argv) {
  auto m = Model::Load(argv[1]);
  std::vector<std::unique_ptr<C>> cs;
  cs.push_back(std::make_unique<C>(*m, 1, 1, 4096, true));
  cs.push_back(std::make_unique<C>(*m, 16, 16, 4096, true));
  cs.push_back(std::make_unique<C>(*m, 16, 16, 4096, false));
  cs.push_back(std::make_unique<C>(*m, 1, 1, 512, true));
  std::vector<std::vector<double>> s(cs.size());
  for (int r = 0; r < 25; ++r)
    for (size_t c = 0; c < cs.size(); ++c) { cs[c]->Pass(); for (int i = 0; i < 5; ++i) s[c].push_back(cs[c]->Pass()); }
  const char* names[] = {"seq1 tree1 ctx4096", "seq16 tree16 ctx4096", "seq16 tree16 nolazy", "seq1 tree1 ctx512"};
  for (size_t c = 0; c < cs.size(); ++c) printf("%s: %.2f\n", names[c], Median(s[c]));
}
