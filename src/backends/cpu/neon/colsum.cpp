// Column sums in NEON (colsum_add's kernel, linear.cpp): columns [j0, j1) in stripes of up to
// 8 vectors, every row added in order: each column's sum is the reference loop's, bit for bit.
#include <algorithm>

#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  constexpr int kV = 8;
  for (int64_t c0 = j0; c0 < j1; c0 += 4 * kV) {
    float32x4_t acc[kV];
    for (int v = 0; v < kV; ++v) acc[v] = vdupq_n_f32(0.f);
    const int nv = int(std::min<int64_t>(kV, (j1 - c0 + 3) / 4));
    for (int64_t i = 0; i < M; ++i)
      for (int v = 0; v < nv; ++v) acc[v] = vaddq_f32(acc[v], load(dy + i * N + c0 + 4 * v, j1 - c0 - 4 * v));
    for (int v = 0; v < nv; ++v) {
      float* d = db + c0 + 4 * v;
      store(d, j1 - c0 - 4 * v, vaddq_f32(load(d, j1 - c0 - 4 * v), acc[v]));
    }
  }
}

}  // namespace vit::cpu::neon
