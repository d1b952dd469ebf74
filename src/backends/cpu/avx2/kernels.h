// The AVX2 + FMA kernels of the CPU backend that no family header (gelu.h, softmax.h,
// layernorm.h) declares, called by the dispatchers at the top of backends/cpu/ where isa()
// is Isa::avx2 (or avx512 without a kernel of its own), only inside `#if VIT_ISA_X86`: this
// folder is compiled for x86-64 alone. Same conventions as cpu.h and avx512/kernels.h.
#pragma once
#include <cstdint>

namespace vit::cpu::avx2 {

// ---- colsum.cpp: db[j] += the sum over rows of dy[M,N] for columns [j0, j1), each column's
// rows in order (one thread; colsum_add hands each thread a block of columns): the bits of
// the plain loop.
void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);

}  // namespace vit::cpu::avx2
