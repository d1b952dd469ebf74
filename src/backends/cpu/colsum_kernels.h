// colsum_add's kernels per instruction set (linear.cpp dispatches and splits the columns
// over the threads): db[j] += sum over rows i of dy[i, j] for columns [j0, j1) of dy[M, N].
#pragma once
#include <cstdint>

namespace vit::cpu::avx2 {
void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);
}  // namespace vit::cpu::avx2
