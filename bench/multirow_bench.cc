// One MUL_MAT of a quantized weight matrix of the default target's shapes by N rows, as
// llama.cpp's CPU backend runs it, stock kernels (GGML_MULTIROW=0) and graft's multi-row
// kernels (ggml-patch/) alternated in one process. Usage:
//   multirow_bench [threads=2] [reps=21] [sizes=1,2,3,4,8,16]
// Prints per weight type and N the median ms of each and their ratio to N = 1, and
// what reading the weight's bytes alone takes on as many threads: the floor of a
// memory-bound product (for a matrix that fits the L3 cache, the cache's floor).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include "backend/ggml_cpu.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms for `threads` threads to read `bytes` bytes once (each its own contiguous
// share, summed so the loads cannot be dropped), the same buffer every repetition as a
// product reads its weights. The buffer is filled first so its pages exist.
double ReadMs(size_t bytes, int threads, int reps) {
  std::vector<uint64_t> buf(bytes / sizeof(uint64_t), 1);
  std::vector<double> ms;
  std::vector<uint64_t> sums(threads);
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t) {
      team.emplace_back([&, t] {
        const size_t lo = buf.size() * t / threads, hi = buf.size() * (t + 1) / threads;
        uint64_t s = 0;
        for (size_t i = lo; i < hi; ++i) s += buf[i];
        sums[t] = s;
      });
    }
    for (std::thread& th : team) th.join();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) ms.push_back(t);
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  if (total != buf.size()) std::fprintf(stderr, "read check failed\n");
  return Median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 21;
  std::vector<int> sizes;
  std::stringstream ss(argc > 3 ? argv[3] : "1,2,3,4,8,16");
  for (std::string t; std::getline(ss, t, ',');) sizes.push_back(std::atoi(t.c_str()));
  struct Shape { ggml_type type; int64_t k, m; const char* what; };
  // Qwen2.5-1.5B: ffn_up/gate (Q4_K), ffn_down (Q6_K in half the layers), the tied output (Q6_K).
  const Shape shapes[] = {{GGML_TYPE_Q4_K, 1536, 8960, "ffn_up Q4_K 1536x8960"},
                          {GGML_TYPE_Q6_K, 8960, 1536, "ffn_down Q6_K 8960x1536"},
                          {GGML_TYPE_Q6_K, 1536, 151936, "output Q6_K 1536x151936"},
                          // As large as the output: Q4_K streamed from memory, as a model's
                          // layers are (the whole model does not fit the cache; ffn_up does).
                          {GGML_TYPE_Q4_K, 1536, 151936, "Q4_K 1536x151936 (from memory)"}};
  ggml_backend_t backend = ggml_backend_cpu_init();
  // Q4_K repacked as llama.cpp loads it (the multi-row Q4_K kernel is for that layout).
  ggml_backend_buffer_type_t repack = graft::CpuRepackBufferType();
  ggml_backend_cpu_set_n_threads(backend, threads);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::printf("%d threads, median of %d; ratio = ms / ms at N=1 of the same kernels\n", threads, reps);
  for (const Shape& sh : shapes) {
    ggml_init_params wp{ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context* wctx = ggml_init(wp);
    ggml_tensor* w = ggml_new_tensor_2d(wctx, sh.type, sh.k, sh.m);
    ggml_backend_buffer_t wbuf =
        ggml_backend_alloc_ctx_tensors_from_buft(wctx, sh.type == GGML_TYPE_Q4_K && repack != nullptr ? repack : ggml_backend_cpu_buffer_type());
    {
      std::vector<float> f(sh.k * sh.m);
      for (float& v : f) v = nd(rng);
      std::vector<uint8_t> q(ggml_nbytes(w));
      ggml_quantize_chunk(sh.type, f.data(), q.data(), 0, sh.m, sh.k, nullptr);
      ggml_backend_tensor_set(w, q.data(), 0, q.size());
    }
    const double read_ms = ReadMs(ggml_nbytes(w), threads, reps);
    std::printf("%s (%.0f MB; reading its bytes alone: %.2f ms, %.1f GB/s)\n"
                "     N   stock ms  x N=1   multirow ms  x N=1  x read\n",
                sh.what, ggml_nbytes(w) / 1e6, read_ms, ggml_nbytes(w) / read_ms / 1e6);
    double base[2] = {0, 0};
    for (int n : sizes) {
      ggml_init_params ip{ggml_tensor_overhead() * 4 + ggml_graph_overhead(), nullptr, true};
      ggml_context* ctx = ggml_init(ip);
      ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, sh.k, n);
      ggml_tensor* y = ggml_mul_mat(ctx, w, x);
      ggml_cgraph* gf = ggml_new_graph(ctx);
      ggml_build_forward_expand(gf, y);
      ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
      std::vector<float> xv(sh.k * n);
      for (float& v : xv) v = nd(rng);
      ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
      std::vector<double> ms[2];
      for (int r = 0; r < reps + 1; ++r) {
        for (int mode = 0; mode < 2; ++mode) {  // alternate: drift hits both alike
          if (mode == 0) setenv("GGML_MULTIROW", "0", 1);
          else unsetenv("GGML_MULTIROW");  // the widest set this CPU has
          const auto t0 = std::chrono::steady_clock::now();
          ggml_backend_graph_compute(backend, gf);
          const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) ms[mode].push_back(t);  // the first is a warm-up
        }
      }
      const double a = Median(ms[0]), b = Median(ms[1]);
      if (n == sizes.front()) base[0] = a, base[1] = b;
      std::printf("%6d %10.2f %6.2f %12.2f %6.2f %7.2f\n", n, a, a / base[0], b, b / base[1], b / read_ms);
      ggml_backend_buffer_free(buf);
      ggml_free(ctx);
    }
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
  }
  ggml_backend_free(backend);
  return 0;
}
