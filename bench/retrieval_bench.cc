// Retrieval micro-benchmarks (docs/design.md §2). Streams are synthetic: Zipf(1.1) tokens over
// a vocabulary, with 35% of the stream copied in 4-32 token spans from earlier (the
// repetition that makes retrieval worth doing).
//   retrieval_bench --benchmark_filter=SuffixAppend    append throughput, bytes/token
//   retrieval_bench --benchmark_filter=SuffixQuery     request-local query p50/p99
//   retrieval_bench --benchmark_filter=DatastoreBuild  build throughput, peak RSS
//   retrieval_bench --benchmark_filter=DatastoreQuery  corpus query p50/p99
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graft/retrieval.h"
#include "graft/retrieval_datastore.h"
#include "graft/retrieval_next_token.h"
#include "graft/retrieval_pld.h"
#include "graft/retrieval_suffix.h"

namespace graft {
namespace {

std::vector<Token> SyntheticStream(int64_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> cdf(vocab);
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) cdf[i] = (sum += 1.0 / std::pow(i + 1.0, 1.1));
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<Token> out;
  out.reserve(n);
  while (static_cast<int64_t>(out.size()) < n) {
    if (out.size() > 64 && rng() % 100 < 35) {
      const int64_t len = 4 + rng() % 29;
      const int64_t start = rng() % (out.size() - 32);
      for (int64_t k = 0; k < len && static_cast<int64_t>(out.size()) < n; ++k)
        out.push_back(out[start + k]);
    } else {
      out.push_back(static_cast<Token>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin()));
    }
  }
  return out;
}

double PeakRssMiB() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_maxrss / 1024.0;
}

void ReportPercentiles(benchmark::State& state, std::vector<double>& ns) {
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  state.counters["p50_ns"] = ns[ns.size() / 2];
  state.counters["p99_ns"] = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)];
  state.counters["max_ns"] = ns.back();
}

// Append throughput: build a fresh index of n tokens per iteration.
void BM_SuffixAppend(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<Token> stream = SyntheticStream(n, 32000, 1);
  size_t bytes = 0;
  int32_t states = 0;
  int64_t transitions = 0;
  for (auto _ : state) {
    SuffixIndex index;
    index.Append(stream);
    benchmark::DoNotOptimize(index.num_states());
    bytes = index.MemoryBytes();
    states = index.num_states();
    transitions = index.num_transitions();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["ns_per_token"] = benchmark::Counter(
      static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["bytes_per_token"] = static_cast<double>(bytes) / n;
  state.counters["states_per_token"] = static_cast<double>(states) / n;
  state.counters["trans_per_token"] = static_cast<double>(transitions) / n;
}
BENCHMARK(BM_SuffixAppend)->Arg(1 << 10)->Arg(32 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// Decode-loop query: the index holds n tokens; each iteration appends the next token of
// the stream and queries with the whole text as context (budget = range(1)).
void BM_SuffixQuery(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int32_t budget = static_cast<int32_t>(state.range(1));
  const std::vector<Token> stream = SyntheticStream(n + (1 << 20), 32000, 2);
  RetrievalOptions options;
  options.max_occurrences = static_cast<int32_t>(state.range(2));
  SuffixIndex index(options);
  index.Append(TokenSpan(stream).first(n));
  int64_t next = n;
  std::vector<double> ns;
  ns.reserve(1 << 20);
  CandidateTrie out;
  int64_t nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    index.Append(stream[next++]);
    if (next == static_cast<int64_t>(stream.size())) next = n;
    state.ResumeTiming();
    const auto t0 = std::chrono::steady_clock::now();
    index.Query(index.text(), budget, &out);
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    nodes += out.size();
  }
  ReportPercentiles(state, ns);
  state.counters["nodes"] = static_cast<double>(nodes) / state.iterations();
}
BENCHMARK(BM_SuffixQuery)
    ->Args({1 << 10, 32, 32})->Args({32 << 10, 32, 32})->Args({1 << 20, 32, 32})
    ->Args({32 << 10, 64, 32})->Args({32 << 10, 32, 64})->Args({1 << 20, 32, 64})
    ->Unit(benchmark::kMicrosecond)->Iterations(20000);

// Interleaved append + query, no pause: the figure the engine sees per accepted token.
void BM_SuffixAppendQueryLoop(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<Token> stream = SyntheticStream(n, 32000, 3);
  CandidateTrie out;
  for (auto _ : state) {
    SuffixIndex index;
    for (int64_t i = 0; i < n; ++i) {
      index.Append(stream[i]);
      index.Query(index.text(), 32, &out);
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SuffixAppendQueryLoop)->Arg(32 << 10)->Unit(benchmark::kMillisecond);

void BM_PromptLookupQuery(benchmark::State& state) {
  const std::vector<Token> ctx = SyntheticStream(state.range(0), 32000, 4);
  PromptLookup pld;
  CandidateTrie out;
  for (auto _ : state) {
    pld.Query(ctx, 16, &out);
    benchmark::DoNotOptimize(out.size());
  }
}
BENCHMARK(BM_PromptLookupQuery)->Arg(1 << 10)->Arg(32 << 10)->Unit(benchmark::kMicrosecond);

void BM_NextTokenTable(benchmark::State& state) {
  const int32_t vocab = 262144;
  NextTokenTable table(vocab);
  std::mt19937 rng(5);
  std::vector<Token> next(8);
  std::vector<float> probs(8);
  for (int i = 0; i < 200000; ++i) {
    for (int k = 0; k < 8; ++k) {
      next[k] = static_cast<Token>(rng() % 5000);
      probs[k] = 0.5f / (k + 1);
    }
    table.Update(static_cast<Token>(rng() % 5000), next, probs);
  }
  CandidateTrie out;
  std::vector<Token> ctx = {1};
  for (auto _ : state) {
    ctx[0] = static_cast<Token>(rng() % 5000);
    table.Query(ctx, static_cast<int32_t>(state.range(0)), &out);
    benchmark::DoNotOptimize(out.size());
  }
  state.counters["bytes"] = static_cast<double>(table.MemoryBytes());
}
BENCHMARK(BM_NextTokenTable)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);

std::string BenchPath() { return "/tmp/graft_retrieval_bench_" + std::to_string(::getpid()) + ".idx"; }

// Build throughput over n tokens from a vocabulary of range(1) (32000 -> 2-byte codes,
// 150000 -> 3-byte codes), documents of ~2000 tokens.
void BM_DatastoreBuild(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<Token> tokens = SyntheticStream(n, static_cast<int32_t>(state.range(1)), 6);
  for (int64_t i = 1999; i < n; i += 2000) tokens[i] = kDatastoreSeparator;
  const std::string path = BenchPath();
  const double rss_before = PeakRssMiB();
  for (auto _ : state) BuildDatastore(tokens, 1, path);
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
  state.counters["rss_before_MiB"] = rss_before;
  auto ds = Datastore::Open(path, 1);
  state.counters["file_bytes_per_token"] = static_cast<double>(ds->Stats().file_bytes) / n;
  const auto t0 = std::chrono::steady_clock::now();
  ds->Verify();
  state.counters["verify_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ds.reset();
  const auto t1 = std::chrono::steady_clock::now();
  ds = Datastore::Open(path, 1);
  state.counters["open_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  std::remove(path.c_str());
}
BENCHMARK(BM_DatastoreBuild)
    ->Args({1 << 20, 32000})->Args({16 << 20, 32000})->Args({16 << 20, 150000})
    ->Unit(benchmark::kMillisecond)->Iterations(1);

// Query latency on an n-token datastore; contexts are held-out stream pieces.
void BM_DatastoreQuery(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<Token> tokens = SyntheticStream(n + 200000, 32000, 7);
  std::vector<Token> held(tokens.end() - 200000, tokens.end());
  tokens.resize(n);
  for (int64_t i = 1999; i < n; i += 2000) tokens[i] = kDatastoreSeparator;
  const std::string path = BenchPath();
  BuildDatastore(tokens, 1, path);
  auto ds = Datastore::Open(path, 1);
  std::remove(path.c_str());  // stays mapped
  std::mt19937 rng(8);
  std::vector<double> ns;
  CandidateTrie out;
  int64_t nodes = 0;
  for (auto _ : state) {
    const int64_t end = 64 + rng() % (held.size() - 64);
    const TokenSpan ctx(held.data() + end - 64, 64);
    const auto t0 = std::chrono::steady_clock::now();
    ds->Query(ctx, static_cast<int32_t>(state.range(1)), &out);
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    nodes += out.size();
  }
  ReportPercentiles(state, ns);
  state.counters["nodes"] = static_cast<double>(nodes) / state.iterations();
}
BENCHMARK(BM_DatastoreQuery)->Args({1 << 20, 32})->Args({16 << 20, 32})
    ->Unit(benchmark::kMicrosecond)->Iterations(20000);

}  // namespace
}  // namespace graft

BENCHMARK_MAIN();
