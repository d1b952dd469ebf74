// The AVX2 + FMA kernels of the CPU backend that no family header (gelu.h, softmax.h,
// layernorm.h, narrow.h) declares, called by the dispatchers at the top of backends/cpu/ where isa()
// is Isa::avx2 (or avx512 without a kernel of its own), only inside `#if VIT_ISA_X86`: this
// folder is compiled for x86-64 alone. Same conventions as cpu.h and avx512/kernels.h.
// The kernels every vector path has are declared once in path_kernels.h (VIT_PATH_KERNELS).
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"     // HeadScores
#include "backends/cpu/narrow.h"  // skinny_gemm, the narrow-head attention kernels
#include "backends/cpu/path_kernels.h"

namespace vit::cpu::avx2 {

VIT_PATH_KERNELS

// ---- linear_packed.cpp: y[M,N] = x[M,K] wp^T + b[N] (b may be null; K > 0) from weights
// packed by pack_linear_weights (linear_packed.h), GELU applied when gelu; OpenMP-threaded.
void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu);

// ---- tiled_gemm.cpp: C[M,N] = A[M,K] op(B) + beta C (alpha 1), each output one fma chain over
// k in order from 0, C or beta C (gemm_chain_reference's bits on any blocking and thread
// count); on nt threads (1 inside a shard). For gemm()'s large products over narrow layers
// (tiled_preferred). bias (N floats, beta 0): each chain starts from bias[j] instead, the bits
// of C seeded with the bias and beta = 1, as the linear layer wants them (no pass to seed C).
void tiled_gemm(bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float beta, float* C, int64_t ldc, int nt, const float* bias = nullptr);

}  // namespace vit::cpu::avx2
