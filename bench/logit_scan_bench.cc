// The CPU work on each verified row beside the target pass: the greedy Argmax, the
// next-token table's top-8 softmax and the sampler's distribution, on a row of
// Qwen2.5's vocabulary size (152k logits, normal with sd 3 and one clear winner).
//   build/bench/logit_scan_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <random>
#include <utility>
#include <vector>

#include "engine/topk.h"
#include "graft/sampling.h"

namespace {

constexpr int32_t kVocab = 151936;

std::vector<float> Row() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> l(kVocab);
  for (float& x : l) x = normal(rng);
  l[1234] = 18.0f;
  return l;
}

void BM_Argmax(benchmark::State& state) {
  const std::vector<float> l = Row();
  for (auto _ : state) benchmark::DoNotOptimize(graft::Argmax(l.data(), kVocab));
}
BENCHMARK(BM_Argmax)->Unit(benchmark::kMicrosecond);

void BM_TopKSoftmax(benchmark::State& state) {
  const std::vector<float> l = Row();
  std::vector<std::pair<float, graft::Token>> out;
  for (auto _ : state) {
    graft::TopKSoftmax(l.data(), kVocab, 8, &out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_TopKSoftmax)->Unit(benchmark::kMicrosecond);

// Arguments: top_k, top_p x 100 (temperature 0.8).
void BM_MakeDistribution(benchmark::State& state) {
  const std::vector<float> l = Row();
  graft::SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = static_cast<int>(state.range(0));
  p.top_p = static_cast<float>(state.range(1)) / 100.0f;
  for (auto _ : state) benchmark::DoNotOptimize(graft::MakeDistribution(l.data(), kVocab, p).token.size());
}
BENCHMARK(BM_MakeDistribution)->Args({0, 100})->Args({0, 95})->Args({40, 100})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
