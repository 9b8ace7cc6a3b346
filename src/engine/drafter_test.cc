// The drafter's KV state on the tiny draft model: after any mix of drafted steps
// (committing random accepted paths, including nodes the draft never decoded) and
// skipped steps (tokens committed without drafting, caught up later), the draft
// cache holds exactly the committed tokens: its next-token distribution equals a
// fresh context's fed the same tokens. Mirrors the target's commit test in backend_test.
#include "engine/drafter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/test_models.h"
#include "engine/topk.h"

namespace graft {
namespace {

using graft::testing::ModelPath;

ContextOptions DraftContextOptions() {
  ContextOptions co;
  co.n_ctx = 1024;
  co.max_tree = 64;
  co.n_seq_max = 64;
  return co;
}

// The root's children of a dense draft equal the top-k of a fresh context's row.
void ExpectCacheHolds(Drafter& drafter, const Model& model, const std::vector<Token>& committed) {
  DraftParams p;
  p.budget = 5;
  p.max_depth = 1;
  p.topk = 4;
  TokenTree tree;
  tree.Reset(committed.back());
  drafter.Draft(committed, p, &tree);
  Context fresh(model, DraftContextOptions());
  std::vector<std::pair<float, Token>> want;
  TopKSoftmax(fresh.Prefill(committed, true), model.n_vocab(), 4, &want);
  const std::vector<int32_t> kids = tree.Children(0);
  ASSERT_EQ(kids.size(), want.size());
  for (size_t i = 0; i < kids.size(); ++i) {
    EXPECT_EQ(tree.token[kids[i]], want[i].second) << "child " << i << " after " << committed.size() << " tokens";
    // Kernel rounding only: a batched catch-up and a fresh prefill agree to ~1e-3 in
    // the logits (backend_test); a wrong cache would change the distribution outright.
    EXPECT_NEAR(std::log(tree.prob[kids[i]]), std::log(want[i].first), 0.02) << "child " << i;
  }
  drafter.Commit({0});
}

TEST(DrafterTest, CacheHoldsExactlyTheCommittedTokens) {
  auto model = Model::Load(ModelPath("tiny-draft.gguf"));
  Context ctx(*model, DraftContextOptions());
  Drafter drafter(&ctx);
  std::mt19937 rng(11);
  std::uniform_int_distribution<Token> tok(100, model->n_vocab() - 1);
  std::vector<Token> committed = model->Tokenize("Once upon a time there was a", true, false);
  int drafted = 0, skipped = 0, undecoded = 0;
  for (int step = 0; step < 40; ++step) {
    if (step % 3 == 2) {  // a step without the draft model: it catches up later
      committed.push_back(tok(rng));
      ++skipped;
      continue;
    }
    DraftParams p;
    p.budget = 12;
    p.max_depth = 4;
    p.topk = 3;
    p.frontier = 2;
    TokenTree tree;
    tree.Reset(committed.back());
    drafter.Draft(committed, p, &tree);
    ++drafted;
    // A random accepted path from the root (possibly through nodes never decoded:
    // leaves of the last level), then a bonus token.
    std::vector<int32_t> path = {0};
    for (;;) {
      const std::vector<int32_t> kids = tree.Children(path.back());
      if (kids.empty() || rng() % 4 == 0) break;
      path.push_back(kids[rng() % kids.size()]);
    }
    for (int32_t node : path) undecoded += drafter.DraftSeq(node) < 0;
    drafter.Commit(path);
    for (size_t i = 1; i < path.size(); ++i) committed.push_back(tree.token[path[i]]);
    committed.push_back(tok(rng));
    EXPECT_LE(ctx.n_past(), static_cast<int32_t>(committed.size()));
    if (step % 7 == 0) ExpectCacheHolds(drafter, *model, committed);
  }
  EXPECT_GT(drafted, 20);
  EXPECT_GT(skipped, 10);
  EXPECT_GT(undecoded, 0) << "no accepted path went through an undecoded node: the test lost its point";
  ExpectCacheHolds(drafter, *model, committed);
}

}  // namespace
}  // namespace graft
