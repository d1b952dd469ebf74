// The AVX2 + FMA kernels of the CPU backend that no family header (gelu.h, softmax.h,
// layernorm.h, narrow.h) declares, called by the dispatchers at the top of backends/cpu/ where isa()
// is Isa::avx2 (or avx512 without a kernel of its own), only inside `#if VIT_ISA_X86`: this
// folder is compiled for x86-64 alone. Same conventions as cpu.h and avx512/kernels.h.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"     // HeadScores
#include "backends/cpu/narrow.h"  // skinny_gemm, the narrow-head attention kernels

namespace vit::cpu::avx2 {

// ---- colsum.cpp: db[j] += the sum over rows of dy[M,N] for columns [j0, j1), each column's
// rows in order (one thread; colsum_add hands each thread a block of columns): the bits of
// the plain loop.
void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);

// ---- head_gemm.cpp: attention's per-head products in register blocks (cpu.h's head_gemm and
// head_transpose; head_scores is head_gemm and then the row softmax on this path).
void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc);
void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);

// ---- linear_packed.cpp: y[M,N] = x[M,K] wp^T + b[N] (b may be null; K > 0) from weights
// packed by pack_linear_weights (linear_packed.h); OpenMP-threaded.
void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N);

// ---- linear_bf16.cpp: dst[0, n) = x rounded to bf16 (nearest even; NaN stays NaN), the
// bits of round_to_bf16_reference. One thread.
void round_to_bf16(uint16_t* dst, const float* x, int64_t n);

// ---- residual.cpp: out[0, n) = x + s branch (a product, then a sum; no fma): the residual of a
// sample without LayerScale, one contiguous run.
void residual_run(float* out, const float* x, const float* branch, float s, int64_t n);

// ---- patch_embed.cpp: im2col_patches' row of patches py of sample b for short patch rows
// (Pw <= 16) into out (Gw patches, C Ph Pw floats each), in vector moves.
void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                          int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw);

}  // namespace vit::cpu::avx2
