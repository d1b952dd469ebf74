// Linear layer, y = x w^T + b (PyTorch's nn.Linear), forward and backward.
#include <cstring>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/neon/kernels.h"
#include "core/threads.h"

namespace vit::cpu {

void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t M, int64_t K, int64_t N,
                    bool y_zero) {
  gemm_nt_bias(M, N, K, x, K, w, K, b, y, N, y_zero);
}

void colsum_add(float* db, const float* dy, int64_t M, int64_t N) {
  // Each thread owns a block of columns and sums its rows in order: deterministic. With
  // AVX-512 the row segments are read as vectors (a row's stretch is contiguous); the plain
  // loop walks 16 columns down every row.
#if VIT_ISA_X86
  if (isa() == Isa::avx512)
    return by_column_blocks(N, M * N,
                            [&](int64_t j0, int64_t j1) { avx512::colsum_columns(db, dy, M, N, j0, j1); });
  if (isa() == Isa::avx2)
    return by_column_blocks(N, M * N,
                            [&](int64_t j0, int64_t j1) { avx2::colsum_columns(db, dy, M, N, j0, j1); });
#endif
#if VIT_ISA_NEON
  if (isa() == Isa::neon)
    return by_column_blocks(N, M * N,
                            [&](int64_t j0, int64_t j1) { neon::colsum_columns(db, dy, M, N, j0, j1); });
#endif
  const int64_t blk = 16;
#pragma omp parallel for num_threads(threads_for(M* N)) schedule(static)
  for (int64_t j0 = 0; j0 < N; j0 += blk) {
    int64_t j1 = j0 + blk < N ? j0 + blk : N;
    float acc[16] = {0};
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += dy[i * N + j];
    for (int64_t j = j0; j < j1; ++j) db[j] += acc[j - j0];
  }
}

void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                     int64_t M, int64_t K, int64_t N, bool accumulate_dx) {
  if (dx) gemm(false, false, M, K, N, 1.f, dy, N, w, K, accumulate_dx ? 1.f : 0.f, dx, K);
  if (dw) gemm(true, false, N, K, M, 1.f, dy, N, x, K, 1.f, dw, K);
  if (db) colsum_add(db, dy, M, N);
}

}  // namespace vit::cpu
