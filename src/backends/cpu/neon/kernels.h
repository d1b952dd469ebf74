// The NEON kernels of the CPU backend that no family header (gelu.h, softmax.h, layernorm.h,
// narrow.h) declares, called by the dispatchers at the top of backends/cpu/ where isa() is Isa::neon,
// only inside `#if VIT_ISA_NEON`: this folder is compiled for aarch64 alone. Same
// conventions as cpu.h and avx2/kernels.h.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"     // HeadScores
#include "backends/cpu/narrow.h"  // skinny_gemm, the narrow-head attention kernels

namespace vit::cpu::neon {

// ---- colsum.cpp: db[j] += the sum over rows of dy[M,N] for columns [j0, j1), each column's
// rows in order (the plain loop's bits).
void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);

// ---- head_gemm.cpp: cpu.h's head_gemm in register blocks and head_transpose in 4 x 4 tiles
// (head_scores is head_gemm and then the row softmax on this path).
void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc);
void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);

}  // namespace vit::cpu::neon
