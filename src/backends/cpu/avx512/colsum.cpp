// The linear layer's bias gradient in AVX-512: column sums of dy (colsum_add in linear.cpp
// hands each thread a block of columns). Declared in kernels.h.
#include "backends/cpu/avx512/colsum.h"
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"

namespace vit::cpu::avx512 {

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
}  // namespace

// The row phases serve every block of a matrix of at most 64 columns and none of a wider
// one, whatever the split into blocks, so the sums do not depend on the thread count.
void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
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

}  // namespace vit::cpu::avx512
