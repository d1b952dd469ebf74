// Column sums in AVX2 (colsum_add's kernel, linear.cpp): columns [j0, j1) in stripes of up to
// 4 vectors, every row added in order, so each column's sum is the reference loop's, bit for
// bit, whatever the split of columns over the threads.
#include <algorithm>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"

namespace vit::cpu::avx2 {

VIT_AVX2 void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  constexpr int kV = 4;
  for (int64_t c0 = j0; c0 < j1; c0 += 8 * kV) {
    __m256 acc[kV];
    for (int v = 0; v < kV; ++v) acc[v] = _mm256_setzero_ps();
    const int nv = int(std::min<int64_t>(kV, (j1 - c0 + 7) / 8));
    for (int64_t i = 0; i < M; ++i)
      for (int v = 0; v < nv; ++v)
        acc[v] = _mm256_add_ps(acc[v], load(dy + i * N + c0 + 8 * v, j1 - c0 - 8 * v));
    for (int v = 0; v < nv; ++v) {
      float* d = db + c0 + 8 * v;
      store(d, j1 - c0 - 8 * v, _mm256_add_ps(load(d, j1 - c0 - 8 * v), acc[v]));
    }
  }
}

}  // namespace vit::cpu::avx2
