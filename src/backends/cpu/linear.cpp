// Linear layer, y = x w^T + b (PyTorch's nn.Linear), forward and backward.
#include <cstring>

#include "backends/cpu/avx512/colsum.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/colsum_kernels.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "vit/core/threads.h"

namespace vit::cpu {

void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t M, int64_t K, int64_t N,
                    bool y_zero) {
  gemm_nt_bias(M, N, K, x, K, w, K, b, y, N, y_zero);
}

namespace {
template <int NV>
VIT_AVX512 void colsum_narrow(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  colsum_narrow_by_rows<NV>(db, M, j0, j1, [&](int64_t i, int64_t c, __mmask16 m) VIT_AVX512 {
    return _mm512_maskz_loadu_ps(m, dy + i * N + c);
  });
}

// Columns [j0, j1) of a wider matrix, 8 vectors at a time in registers, every row in order.
VIT_AVX512 void colsum_wide(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  constexpr int kV = 8;
  for (int64_t c0 = j0; c0 < j1; c0 += 16 * kV) {
    __m512 acc[kV];
    __mmask16 m[kV];
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) {
      m[v] = simd::lanes(j1 - c0 - 16 * v);
      acc[v] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < M; ++i) {
      const float* row = dy + i * N + c0;
#pragma GCC unroll 8
      for (int v = 0; v < kV; ++v) acc[v] = _mm512_add_ps(acc[v], _mm512_maskz_loadu_ps(m[v], row + 16 * v));
    }
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) {
      float* d = db + c0 + 16 * v;
      _mm512_mask_storeu_ps(d, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], d), acc[v]));
    }
  }
}

// The row phases serve every block of a matrix of at most 64 columns and none of a wider
// one, whatever the split into blocks, so the sums do not depend on the thread count.
void colsum_block(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  if (N > kColsumNarrowN) return colsum_wide(db, dy, M, N, j0, j1);
  switch ((j1 - j0 + 15) / 16) {
    case 0: return;
    case 1: return colsum_narrow<1>(db, dy, M, N, j0, j1);
    case 2: return colsum_narrow<2>(db, dy, M, N, j0, j1);
    case 3: return colsum_narrow<3>(db, dy, M, N, j0, j1);
    case 4: return colsum_narrow<4>(db, dy, M, N, j0, j1);
    default: return colsum_wide(db, dy, M, N, j0, j1);
  }
}
}  // namespace

void colsum_add(float* db, const float* dy, int64_t M, int64_t N) {
  // Each thread owns a block of columns and sums its rows in order: deterministic. With
  // AVX-512 the row segments are read as vectors (a row's stretch is contiguous); the plain
  // loop walks 16 columns down every row.
  if (isa() == Isa::avx512)
    return by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) { colsum_block(db, dy, M, N, j0, j1); });
#if VIT_ISA_X86
  if (isa() == Isa::avx2)
    return by_column_blocks(N, M * N,
                            [&](int64_t j0, int64_t j1) { avx2::colsum_columns(db, dy, M, N, j0, j1); });
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
