// The AVX-512 kernels of the CPU backend (the files of this folder), called by the
// dispatchers at the top of backends/cpu/ where isa() is Isa::avx512, and only inside
// `#if VIT_ISA_X86`: this folder is compiled for x86-64 alone (CMakeLists.txt). They run
// AVX-512 instructions whatever the CPU, so a caller checks isa() first; tests that call
// them directly skip without AVX-512. Same conventions as cpu.h (row-major, PyTorch order).
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"     // HeadScores
#include "backends/cpu/narrow.h"  // skinny_gemm, the narrow-head attention kernels

namespace vit::cpu::avx512 {

// ---- head_gemm.cpp: attention's per-head products in register blocks, no library call.
// C[M,N] = alpha * A B[K,N] + beta * C + bias (beta = 0: C is not read; bias: N floats added
// to every row, may be null), with A(i, k) = A[i ars + k aks]: (lda, 1) for A, (1, lda) for
// A^T. One thread; also gemm()'s kernel for few output columns.
void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc);
// The same with beta = 0 (C assigned).
void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float* C, int64_t ldc);
void head_gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc);
// S[M,T] = alpha q[M,D] kT[D,T] (kT: k transposed by head_transpose, leading dim ldk), then
// Store: C = S; Softmax: C = softmax_rows(S, km); SoftmaxBackward: C = P * (S - rowsum(P * S))
// (P[M,T] with C's leading dim; C = dS from S = dP). ldc must be T past 96 keys.
void head_scores(HeadScores mode, int64_t M, int64_t T, int64_t D, float alpha, const float* q, int64_t ldq,
                 const float* kT, int64_t ldk, const uint8_t* km, const float* P, float* C, int64_t ldc);
// cpu::transpose() in 16 x 16 register blocks: dst[cols, rows] (leading dim ldd) =
// src[rows, cols]^T (leading dim lds).
void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);

// ---- linear.cpp: db[j] += the sum over rows of dy[M,N] for columns [j0, j1), each column's
// rows in order (one thread; colsum_add hands each thread a block of columns).
void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);

// ---- linear_packed.cpp: y[M,N] = x[M,K] wp^T + b[N] (b may be null; K > 0) from weights
// packed by pack_linear_weights (linear_packed.h), GELU applied when gelu; OpenMP-threaded.
void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu);

// ---- linear_bf16.cpp: dst[0, n) = x rounded to bf16 (nearest even; NaN stays NaN), the
// bits of round_to_bf16_reference. One thread.
void round_to_bf16(uint16_t* dst, const float* x, int64_t n);

// ---- dropout.cpp: out[0, n) = x + s branch (a product, then a sum; no fma): the residual of a
// sample without LayerScale, one contiguous run.
void residual_run(float* out, const float* x, const float* branch, float s, int64_t n);

// ---- patch_embed.cpp: im2col_patches' row of patches py of sample b for short patch rows
// (Pw <= 16) into out (Gw patches, C Ph Pw floats each), in vector moves.
void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                          int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw);

}  // namespace vit::cpu::avx512
