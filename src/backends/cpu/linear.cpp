// Linear layer, y = x w^T + b (PyTorch's nn.Linear), forward and backward.
#include <cstring>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "core/threads.h"

namespace vit::cpu {

void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t M, int64_t K, int64_t N,
                    bool y_zero) {
  gemm_nt_bias(M, N, K, x, K, w, K, b, y, N, y_zero);
}

void colsum_add(float* db, const float* dy, int64_t M, int64_t N) {
  // Each thread owns a block of columns and sums its rows in order: deterministic. The vector
  // paths read a row's stretch of columns as vectors; the plain loop walks its columns.
  const ColsumColumns columns = kernels().colsum_columns;
  by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) { columns(db, dy, M, N, j0, j1); });
}

void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                     int64_t M, int64_t K, int64_t N, bool accumulate_dx) {
  if (dx) gemm(false, false, M, K, N, 1.f, dy, N, w, K, accumulate_dx ? 1.f : 0.f, dx, K);
  if (dw) gemm(true, false, N, K, M, 1.f, dy, N, x, K, 1.f, dw, K);
  if (db) colsum_add(db, dy, M, N);
}

}  // namespace vit::cpu
