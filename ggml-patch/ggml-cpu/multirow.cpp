// Run-time choice of the multi-row kernel set (see multirow.h).
#include "multirow.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

extern "C" {
#define MULTIROW_DECLARE(isa)                                                                  \
    void ggml_multirow_vec_dot_q6_K_q8_K_##isa(int, float *, size_t, const void *, const void *, \
                                               size_t, int);                                   \
    void ggml_multirow_gemm_q4_K_8x8_q8_K_##isa(int, float *, size_t, const void *, const void *, \
                                                int, int);
MULTIROW_DECLARE(avx2)
MULTIROW_DECLARE(avx512)
MULTIROW_DECLARE(avx512vnni)
}

namespace {

enum Set { kOff = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };

// Each set's name and kernels, indexed by Set (kOff's kernels are never called).
struct Kernels {
    const char * name;
    void (*vec_dot_q6_K)(int, float *, size_t, const void *, const void *, size_t, int);
    void (*gemm_q4_K)(int, float *, size_t, const void *, const void *, int, int);
};
#define MULTIROW_KERNELS(isa) ggml_multirow_vec_dot_q6_K_q8_K_##isa, ggml_multirow_gemm_q4_K_8x8_q8_K_##isa
const Kernels kSets[] = {
    {nullptr, MULTIROW_KERNELS(avx2)},
    {"avx2", MULTIROW_KERNELS(avx2)},
    {"avx512", MULTIROW_KERNELS(avx512)},
    {"avx512vnni", MULTIROW_KERNELS(avx512vnni)},
};
#undef MULTIROW_KERNELS

Set Detected() {
    static const Set detected = [] {
        __builtin_cpu_init();
        const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
        const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                            __builtin_cpu_supports("avx512vl");
        if (avx512 && __builtin_cpu_supports("avx512vnni")) return kAvx512Vnni;
        if (avx512) return kAvx512;
        return avx2 ? kAvx2 : kOff;
    }();
    return detected;
}

// The set the kernels dispatch to: Current() as the last op that asked saw it (the
// environment is read once per op, not once per weight row).
std::atomic<int> g_selected{kOff};

// The detected set, capped by GGML_MULTIROW.
Set Current() {
    const Set best = Detected();
    const char * e = std::getenv("GGML_MULTIROW");
    Set cap = kAvx512Vnni;
    if (e != nullptr && (!strcmp(e, "0") || !strcmp(e, "off"))) cap = kOff;
    else if (e != nullptr && !strcmp(e, "avx2")) cap = kAvx2;
    else if (e != nullptr && !strcmp(e, "avx512")) cap = kAvx512;
    const Set set = best < cap ? best : cap;
    g_selected.store(set, std::memory_order_relaxed);
    return set;
}

const Kernels & Selected() { return kSets[g_selected.load(std::memory_order_relaxed)]; }

}  // namespace

extern "C" {

const char * ggml_multirow_kernels(void) { return kSets[Current()].name; }

// Q6_K's kernel takes every row count up to 16, the most the tiled path pads to: at 16
// rows the tiled path was as fast on a Zen 5 EPYC but took 1.7x as long on a Zen 4 one
// (multirow_bench, output matrix, 2 threads: 61.6 ms against 14 rows' 34.9).
constexpr int64_t kQ6KMaxRows = 16;

bool ggml_multirow_mul_mat(const struct ggml_tensor * src0, const struct ggml_tensor * src1) {
    return src0->type == GGML_TYPE_Q6_K && src0->extra == nullptr && src1->type == GGML_TYPE_F32 &&
           src1->ne[1] >= 2 && src1->ne[1] <= kQ6KMaxRows && src1->ne[2] == 1 &&
           src1->ne[3] == 1 && src0->ne[2] == 1 && src0->ne[3] == 1 && Current() != kOff;
}

bool ggml_multirow_repacked_q4_K(int64_t ne11, int64_t ne12) {
    return ne11 >= 2 && ne11 <= GGML_MULTIROW_MAX && ne12 == 1 && Current() != kOff;
}

void ggml_multirow_vec_dot_q6_K_q8_K(int n, float * s, size_t bs, const void * vx, const void * vy,
                                     size_t by, int nrc) {
    Selected().vec_dot_q6_K(n, s, bs, vx, vy, by, nrc);
}

void ggml_multirow_gemm_q4_K_8x8_q8_K(int n, float * s, size_t bs, const void * vx, const void * vy,
                                      int nr, int nc) {
    Selected().gemm_q4_K(n, s, bs, vx, vy, nr, nc);
}

}  // extern "C"
