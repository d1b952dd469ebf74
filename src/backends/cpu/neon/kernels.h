// The NEON kernels of the CPU backend that no family header (gelu.h, softmax.h, layernorm.h,
// narrow.h) declares, called by the dispatchers at the top of backends/cpu/ where isa() is Isa::neon,
// only inside `#if VIT_ISA_NEON`: this folder is compiled for aarch64 alone. Same
// conventions as cpu.h and avx2/kernels.h.
// The kernels every vector path has are declared once in path_kernels.h (VIT_PATH_KERNELS).
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"     // HeadScores
#include "backends/cpu/narrow.h"  // skinny_gemm, the narrow-head attention kernels
#include "backends/cpu/path_kernels.h"

namespace vit::cpu::neon {

VIT_PATH_KERNELS

// ---- linear_packed.cpp: y[M,N] = x[M,K] wp^T + b[N] (b may be null; K > 0) from weights
// packed by pack_linear_weights (linear_packed.h), GELU applied when gelu; OpenMP-threaded.
void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu);

}  // namespace vit::cpu::neon
