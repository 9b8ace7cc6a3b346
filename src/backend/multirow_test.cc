// The multi-row kernels of graft's ggml-cpu patch (ggml-patch/), tested through ggml's
// own MUL_MAT, as llama.cpp runs them:
//   - every row of an N-row product is bit-identical to the 1-row product of that row
//     (llama.cpp's own 1-row kernel), for N = 1..16, Q6_K and repacked Q4_K weights,
//     every kernel set the CPU has, 1 and 2 threads, shapes off the kernels' tiles;
//   - it agrees with a scalar reference (dequantized weights times dequantized q8_K
//     activations, summed in double).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include "backend/ggml_cpu.h"

namespace {

using graft::CpuBackendFeature;
using graft::CpuRepackBufferType;

// ggml's block_q8_K (ggml-common.h), which no public header declares.
struct BlockQ8K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

// A weight matrix of type `type`, k x m, quantized from random values and held in a
// buffer of `buft` (the repack buffer repacks it as llama.cpp does when loading).
struct Weights {
  ggml_context* ctx = nullptr;
  ggml_backend_buffer_t buf = nullptr;
  ggml_tensor* w = nullptr;
  std::vector<uint8_t> quantized;
  Weights(ggml_type type, int64_t k, int64_t m, ggml_backend_buffer_type_t buft, std::mt19937& rng) {
    ggml_init_params ip{ggml_tensor_overhead() * 4, nullptr, true};
    ctx = ggml_init(ip);
    w = ggml_new_tensor_2d(ctx, type, k, m);
    buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> f(k * m);
    for (float& v : f) v = nd(rng);
    quantized.resize(ggml_nbytes(w));
    ggml_quantize_chunk(type, f.data(), quantized.data(), 0, m, k, nullptr);
    ggml_backend_tensor_set(w, quantized.data(), 0, quantized.size());
  }
  ~Weights() {
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
  }
};

// W^T x for the n rows of x (k values each), computed by ggml's CPU backend.
std::vector<float> MulMat(ggml_backend_t backend, const Weights& wt, const std::vector<float>& x, int64_t n) {
  const int64_t k = wt.w->ne[0], m = wt.w->ne[1];
  ggml_init_params ip{ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(ip);
  ggml_tensor* xt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
  ggml_tensor* y = ggml_mul_mat(ctx, wt.w, xt);
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, y);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
  ggml_backend_tensor_set(xt, x.data(), 0, x.size() * sizeof(float));
  EXPECT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
  std::vector<float> out(m * n);
  ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
  return out;
}

// Dequantized weights (m x k) and q8_K-rounded activations, dotted in double; also the
// sum of |products|, the scale of the rounding the float kernels may add.
void Reference(const Weights& wt, const std::vector<float>& x, int64_t n, std::vector<double>* ref,
               std::vector<double>* mag) {
  const int64_t k = wt.w->ne[0], m = wt.w->ne[1];
  std::vector<float> w(k * m);
  ggml_get_type_traits(wt.w->type)->to_float(wt.quantized.data(), w.data(), k * m);
  EXPECT_EQ(ggml_type_size(GGML_TYPE_Q8_K), sizeof(BlockQ8K));
  std::vector<BlockQ8K> q(k / 256);
  std::vector<float> a(k);
  ref->assign(m * n, 0.0);
  mag->assign(m * n, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x.data() + r * k, q.data(), k);
    for (int64_t i = 0; i < k; ++i) a[i] = q[i / 256].d * q[i / 256].qs[i % 256];
    for (int64_t c = 0; c < m; ++c) {
      double s = 0, t = 0;
      for (int64_t i = 0; i < k; ++i) {
        s += double(w[c * k + i]) * a[i];
        t += std::fabs(double(w[c * k + i]) * a[i]);
      }
      (*ref)[r * m + c] = s;
      (*mag)[r * m + c] = t;
    }
  }
}

struct Case {
  ggml_type type;
  bool repack;
  int64_t k, m;
  int max_rows;  // the largest N the multi-row kernels take for this type (multirow.cpp)
};

class MultirowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* e = std::getenv("GGML_MULTIROW");
    saved_ = e ? e : "";
    had_ = e != nullptr;
  }
  void TearDown() override {
    if (had_) setenv("GGML_MULTIROW", saved_.c_str(), 1);
    else unsetenv("GGML_MULTIROW");
  }
  std::string saved_;
  bool had_ = false;
};

// The kernel sets to test: every one this CPU runs, from the widest down.
std::vector<std::string> KernelSets() {
  const std::string best = CpuBackendFeature("MULTIROW");
  std::vector<std::string> sets;
  if (best == "avx512vnni") sets = {"avx512vnni", "avx512", "avx2"};
  else if (best == "avx512") sets = {"avx512", "avx2"};
  else if (best == "avx2") sets = {"avx2"};
  return sets;
}

TEST_F(MultirowTest, KernelsAreBuiltAndChosenForThisCpu) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
    GTEST_SKIP() << "no AVX2: the stock kernels run";
  }
  const std::string want = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") ? "avx512vnni"
                           : __builtin_cpu_supports("avx512bw")                                       ? "avx512"
                                                                                                       : "avx2";
  EXPECT_EQ(CpuBackendFeature("MULTIROW"), want) << "llama.cpp built without graft's ggml-patch (scripts/setup.sh applies it)";
#else
  GTEST_SKIP() << "x86 kernels only";
#endif
}

TEST_F(MultirowTest, EachRowIsTheOneRowProductBitForBitAndMatchesTheScalarReference) {
  const std::vector<std::string> sets = KernelSets();
  if (sets.empty()) GTEST_SKIP() << "no multi-row kernels on this CPU";
  ggml_backend_buffer_type_t repack = CpuRepackBufferType();
  ASSERT_NE(repack, nullptr);
  // k: 3 and 6 super-blocks; m: Q6_K rows not a multiple of 8 or 16, Q4_K groups of 8 an odd
  // number of times (the 512-bit kernel pairs groups) and even.
  const Case cases[] = {
      {GGML_TYPE_Q6_K, false, 768, 37, 16},
      {GGML_TYPE_Q6_K, false, 1536, 16, 16},
      {GGML_TYPE_Q4_K, true, 768, 40, 16},
      {GGML_TYPE_Q4_K, true, 1536, 64, 16},
  };
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  ggml_backend_t backend = ggml_backend_cpu_init();
  ASSERT_NE(backend, nullptr);
  int checked = 0;
  for (const Case& cs : cases) {
    Weights wt(cs.type, cs.k, cs.m, cs.repack ? repack : ggml_backend_cpu_buffer_type(), rng);
    if (cs.repack) {
      ASSERT_NE(wt.w->extra, nullptr) << "the weights were not repacked";
    }
    std::vector<float> x(cs.k * 16);
    for (float& v : x) v = nd(rng);
    std::vector<double> ref, mag;
    Reference(wt, x, 16, &ref, &mag);
    for (int threads : {1, 2}) {
      ggml_backend_cpu_set_n_threads(backend, threads);
      // 1-row products of each row: llama.cpp's own kernels (N = 1 never takes ours).
      std::vector<std::vector<float>> single(16);
      for (int r = 0; r < 16; ++r) {
        single[r] = MulMat(backend, wt, std::vector<float>(x.begin() + r * cs.k, x.begin() + (r + 1) * cs.k), 1);
      }
      for (const std::string& set : sets) {
        setenv("GGML_MULTIROW", set.c_str(), 1);
        for (int n = 1; n <= 16; ++n) {
          const std::vector<float> y = MulMat(backend, wt, std::vector<float>(x.begin(), x.begin() + n * cs.k), n);
          for (int r = 0; r < n; ++r) {
            for (int64_t c = 0; c < cs.m; ++c) {
              const float got = y[r * cs.m + c];
              SCOPED_TRACE(std::string(ggml_type_name(cs.type)) + " k=" + std::to_string(cs.k) + " set=" + set +
                           " threads=" + std::to_string(threads) + " n=" + std::to_string(n) +
                           " row=" + std::to_string(r) + " col=" + std::to_string(c));
              if (n <= cs.max_rows) {  // above, llama.cpp's own N-row kernels run
                ASSERT_EQ(std::memcmp(&got, &single[r][c], sizeof(float)), 0)
                    << got << " vs the 1-row kernel's " << single[r][c];
              }
              ASSERT_NEAR(got, ref[r * cs.m + c], 1e-5 * mag[r * cs.m + c] + 1e-6);
              ++checked;
            }
          }
        }
      }
    }
  }
  ggml_backend_free(backend);
  EXPECT_GT(checked, 0);
}

}  // namespace
