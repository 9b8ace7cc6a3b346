// The drafter's KV state on the tiny draft model: after any mix of drafted steps
// (committing random accepted paths, including nodes the draft never decoded) and
// skipped steps (tokens committed without drafting, caught up later), the draft
// cache holds exactly the committed tokens: its next-token distribution equals a
// fresh context's fed the same tokens. Mirrors the target's commit test in backend_test.
#include "engine/drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
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

// Drafters on three lanes of one context, drafting together step after step (each
// committing its own random paths), build the trees each would build alone in a
// context of its own, and share their passes: a step costs the passes of its deepest
// draft, not their sum. Their caches stay exactly their committed tokens.
TEST(DrafterTest, DraftsTogetherEqualDraftsAlone) {
  auto model = Model::Load(ModelPath("tiny-draft.gguf"));
  constexpr int kLanes = 3;
  ContextOptions shared_options = DraftContextOptions();
  shared_options.n_lanes = kLanes;
  Context shared(*model, shared_options);
  std::vector<std::unique_ptr<Context>> own;
  std::vector<std::unique_ptr<Drafter>> together, alone;
  std::vector<std::vector<Token>> committed;
  const char* starts[kLanes] = {"Once upon a time there was a", "The capital of France is",
                                "def fib(n):\n    if n < 2:\n        return n\n"};
  for (int l = 0; l < kLanes; ++l) {
    own.push_back(std::make_unique<Context>(*model, DraftContextOptions()));
    together.push_back(std::make_unique<Drafter>(&shared, l));
    alone.push_back(std::make_unique<Drafter>(own.back().get()));
    committed.push_back(model->Tokenize(starts[l], true, false));
  }
  std::mt19937 rng(5);
  std::uniform_int_distribution<Token> tok(100, model->n_vocab() - 1);
  int64_t passes_together = 0, passes_alone = 0, nodes = 0;
  for (int step = 0; step < 12; ++step) {
    std::vector<DraftJob> jobs;
    std::vector<TokenTree> trees(kLanes), ref(kLanes);
    std::vector<int32_t> ref_passes(kLanes);
    for (int l = 0; l < kLanes; ++l) {
      DraftParams p;
      p.budget = 8 + 4 * l;
      p.max_depth = 2 + (step + l) % 4;  // drafts of different depths finish apart
      p.topk = 3;
      p.frontier = 1 + l;
      trees[l].Reset(committed[l].back());
      ref[l].Reset(committed[l].back());
      jobs.push_back({together[l].get(), &committed[l], p, &trees[l]});
      ref_passes[l] = alone[l]->Draft(committed[l], p, &ref[l]);
      passes_alone += ref_passes[l];
    }
    const int32_t passes = DraftTogether(jobs);
    passes_together += passes;
    EXPECT_EQ(passes, *std::max_element(ref_passes.begin(), ref_passes.end())) << "step " << step;
    for (int l = 0; l < kLanes; ++l) {
      EXPECT_EQ(jobs[l].passes, ref_passes[l]) << "step " << step << " lane " << l;
      ASSERT_EQ(trees[l].token, ref[l].token) << "step " << step << " lane " << l;
      EXPECT_EQ(trees[l].parent, ref[l].parent) << "step " << step << " lane " << l;
      for (int32_t i = 1; i < trees[l].size(); ++i) {
        EXPECT_NEAR(std::log(trees[l].prob[i]), std::log(ref[l].prob[i]), 0.02) << "lane " << l << " node " << i;
        EXPECT_EQ(together[l]->DraftSeq(i) >= 0, alone[l]->DraftSeq(i) >= 0) << "lane " << l << " node " << i;
      }
      nodes += trees[l].size();
      // The same random accepted path for both, then a bonus token.
      std::vector<int32_t> path = {0};
      for (;;) {
        const std::vector<int32_t> kids = trees[l].Children(path.back());
        if (kids.empty() || rng() % 4 == 0) break;
        path.push_back(kids[rng() % kids.size()]);
      }
      together[l]->Commit(path);
      alone[l]->Commit(path);
      for (size_t i = 1; i < path.size(); ++i) committed[l].push_back(trees[l].token[path[i]]);
      committed[l].push_back(tok(rng));
      if (step % 3 == 1) committed[l].push_back(tok(rng));  // a step the draft sat out
    }
  }
  for (int l = 0; l < kLanes; ++l) ExpectCacheHolds(*together[l], *model, committed[l]);
  EXPECT_GT(nodes, 12 * kLanes * 4);
  EXPECT_LT(passes_together * 2, passes_alone);
  printf("[draft] %lld shared passes for %lld alone\n", static_cast<long long>(passes_together),
         static_cast<long long>(passes_alone));
}

}  // namespace
}  // namespace graft
