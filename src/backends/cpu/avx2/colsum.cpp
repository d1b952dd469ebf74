// Column sums in AVX2 (colsum_add's kernel, linear.cpp): columns [j0, j1) in stripes of up to
// 4 vectors, every row added in order, so each column's sum is the reference loop's, bit for
// bit, whatever the split of columns over the threads.
#include <algorithm>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/kernel_table.h"  // with_constant

namespace vit::cpu::avx2 {

namespace {
// A stripe of NV vectors from column c0, the last of them `tail` floats (1 to 8): the sums in
// registers (a stripe of a run-time count of vectors had kept them on the stack).
template <int NV>
VIT_AVX2 void colsum_stripe(float* db, const float* dy, int64_t M, int64_t N, int64_t c0, int64_t tail) {
  __m256 acc[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[v] = _mm256_add_ps(acc[v], load(dy + i * N + c0 + 8 * v, v + 1 < NV ? 8 : tail));
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    float* d = db + c0 + 8 * v;
    const int64_t n = v + 1 < NV ? 8 : tail;
    store(d, n, _mm256_add_ps(load(d, n), acc[v]));
  }
}
}  // namespace

void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  constexpr int kV = 4;
  for (int64_t c0 = j0; c0 < j1; c0 += 8 * kV) {
    const int64_t nv = std::min<int64_t>(kV, (j1 - c0 + 7) / 8), tail = j1 - c0 - 8 * (nv - 1);
    with_constant<1, 2, 3, 4>(nv, [&]<int NV>() { colsum_stripe<NV>(db, dy, M, N, c0, tail); });
  }
}

}  // namespace vit::cpu::avx2
