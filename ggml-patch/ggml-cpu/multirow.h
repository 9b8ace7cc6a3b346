#pragma once

// Multi-row quantized products (graft's small-batch patch to ggml-cpu).
//
// A product of a quantized weight matrix with a few activation rows (a speculative tree
// verified in one pass) is memory-bound like a 1-row product, but the stock kernels unpack
// every weight block once per row (Q6_K's vec_dot) or walk the weights once per leftover
// row (repacked Q4_K: gemm on multiples of 4 rows, then gemv per remaining row). These
// kernels read and unpack each weight block once and apply it to 2..GGML_MULTIROW_MAX rows,
// and each row's result is bit-identical to the 1-row kernel's for that row.
//
// Kernel sets (chosen at run time by CPUID): avx512vnni, avx512 (BW+DQ+VL), avx2 (+FMA,
// F16C). GGML_MULTIROW=0 (or off) turns them off; =avx2 or =avx512 caps the set.

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_MULTIROW_MAX 16

// The kernel set in use ("avx512vnni", "avx512", "avx2"), or NULL when none is (no
// suitable CPU, or GGML_MULTIROW=0). Reads GGML_MULTIROW on every call.
const char * ggml_multirow_kernels(void);

// Whether a MUL_MAT of src0 (not repacked) by src1 goes to ggml_multirow_vec_dot_q6_K_q8_K.
bool ggml_multirow_mul_mat(const struct ggml_tensor * src0, const struct ggml_tensor * src1);

// Whether a repacked Q4_K (block_q4_Kx8) MUL_MAT with ne11 rows in ne12 planes goes to
// ggml_multirow_gemm_q4_K_8x8_q8_K.
bool ggml_multirow_repacked_q4_K(int64_t ne11, int64_t ne12);

// s[r*bs] = dot(row vx, y_r) for r < nrc <= GGML_MULTIROW_MAX, y_r = vy + r*by (block_q8_K).
void ggml_multirow_vec_dot_q6_K_q8_K(int n, float * s, size_t bs, const void * vx,
                                     const void * vy, size_t by, int nrc);

// s[r*bs + c] = column c (of nc, a multiple of 8) of repacked Q4_K vx . row r (of nr <=
// GGML_MULTIROW_MAX plain block_q8_K rows of n values, contiguous at vy).
void ggml_multirow_gemm_q4_K_8x8_q8_K(int n, float * s, size_t bs, const void * vx,
                                      const void * vy, int nr, int nc);

#ifdef __cplusplus
}
#endif
