// The AVX-512 kernels of the CPU backend (the files of this folder), called by the
// dispatchers at the top of backends/cpu/ where isa() is Isa::avx512, and only inside
// `#if VIT_ISA_X86`: this folder is compiled for x86-64 alone (CMakeLists.txt). They run
// AVX-512 instructions whatever the CPU, so a caller checks isa() first; tests that call
// them directly skip without AVX-512. Same conventions as cpu.h (row-major, PyTorch order).
// The kernels every vector path has are declared once in path_kernels.h (VIT_PATH_KERNELS).
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"     // HeadScores
#include "backends/cpu/narrow.h"  // skinny_gemm, the narrow-head attention kernels
#include "backends/cpu/path_kernels.h"

namespace vit::cpu::avx512 {

VIT_PATH_KERNELS

// ---- head_gemm.cpp, beyond the shared head_gemm: the same with beta = 0 (C assigned), and
// A row-major.
void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float* C, int64_t ldc);
void head_gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc);
// S[M,T] = alpha q[M,D] kT[D,T] (kT: k transposed by head_transpose, leading dim ldk), then
// Store: C = S; Softmax: C = softmax_rows(S, km); SoftmaxBackward: C = P * (S - rowsum(P * S))
// (P[M,T] with C's leading dim; C = dS from S = dP). ldc must be T past 96 keys.
void head_scores(HeadScores mode, int64_t M, int64_t T, int64_t D, float alpha, const float* q, int64_t ldq,
                 const float* kT, int64_t ldk, const uint8_t* km, const float* P, float* C, int64_t ldc);

// ---- linear_packed.cpp: y[M,N] = x[M,K] wp^T + b[N] (b may be null; K > 0) from weights
// packed by pack_linear_weights (linear_packed.h), GELU applied when gelu; OpenMP-threaded.
void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu);

}  // namespace vit::cpu::avx512
