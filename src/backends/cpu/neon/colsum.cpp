// Column sums in NEON (colsum_add's kernel, linear.cpp): columns [j0, j1) in stripes of up to
// 8 vectors, every row added in order: each column's sum is the reference loop's, bit for bit.
#include <algorithm>

#include "backends/cpu/kernel_table.h"  // with_constant
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// A stripe of NV vectors from column c0, the last of them `tail` floats (1 to 4): the sums in
// registers (a stripe of a run-time count of vectors had kept them on the stack).
template <int NV>
void colsum_stripe(float* db, const float* dy, int64_t M, int64_t N, int64_t c0, int64_t tail) {
  float32x4_t acc[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = vdupq_n_f32(0.f);
  for (int64_t i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      acc[v] = vaddq_f32(acc[v], load(dy + i * N + c0 + 4 * v, v + 1 < NV ? 4 : tail));
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    float* d = db + c0 + 4 * v;
    const int64_t n = v + 1 < NV ? 4 : tail;
    store(d, n, vaddq_f32(load(d, n), acc[v]));
  }
}
}  // namespace

void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  constexpr int kV = 8;
  for (int64_t c0 = j0; c0 < j1; c0 += 4 * kV) {
    const int64_t nv = std::min<int64_t>(kV, (j1 - c0 + 3) / 4), tail = j1 - c0 - 4 * (nv - 1);
    with_constant<1, 2, 3, 4, 5, 6, 7, 8>(nv, [&]<int NV>() { colsum_stripe<NV>(db, dy, M, N, c0, tail); });
  }
}

}  // namespace vit::cpu::neon
