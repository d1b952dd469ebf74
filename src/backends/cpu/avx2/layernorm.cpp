// LayerNorm's AVX2 + FMA kernels (layernorm.h): the reference's two-pass formulas (mean,
// then the centred variance) summed in 8 lanes, one row at a time; the parameter gradients
// column by column with every row in order, as the reference adds them.
#include <algorithm>
#include <cmath>

#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/layernorm.h"

namespace vit::cpu::avx2 {

VIT_AVX2 void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w,
                             const float* b, int64_t i0, int64_t i1, int64_t C, float eps) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * C;
    float* yi = y + i * C;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) acc = _mm256_add_ps(acc, load(xi + c, C - c));
    const float m = hsum(acc) / float(C);
    const __m256 vm = _mm256_set1_ps(m);
    acc = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 live = _mm256_castsi256_ps(tail_mask(C - c));
      const __m256 d = _mm256_and_ps(live, _mm256_sub_ps(load(xi + c, C - c), vm));
      acc = _mm256_fmadd_ps(d, d, acc);
    }
    const float s = 1.f / std::sqrt(hsum(acc) / float(C) + eps);
    const __m256 vs = _mm256_set1_ps(s);
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load(xi + c, C - c), vm), vs);
      store(yi + c, C - c, _mm256_fmadd_ps(xhat, load(w + c, C - c), load(b + c, C - c)));
    }
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w, xhat = (x - mean) rstd.
VIT_AVX2 void layernorm_dx_rows(float* dx, const float* dy, const float* x, const float* mean,
                                const float* rstd, const float* w, int64_t i0, int64_t i1, int64_t C,
                                bool accumulate_dx) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * C;
    const float* dyi = dy + i * C;
    float* dxi = dx + i * C;
    const __m256 vm = _mm256_set1_ps(mean[i]), vs = _mm256_set1_ps(rstd[i]);
    __m256 sg = _mm256_setzero_ps(), sgx = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {  // lanes past C load as 0: g = 0 there
      const __m256 g = _mm256_mul_ps(load(dyi + c, C - c), load(w + c, C - c));
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load(xi + c, C - c), vm), vs);
      sg = _mm256_add_ps(sg, g);
      sgx = _mm256_fmadd_ps(g, xhat, sgx);
    }
    const __m256 mg = _mm256_set1_ps(hsum(sg) / float(C)), mgx = _mm256_set1_ps(hsum(sgx) / float(C));
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 g = _mm256_mul_ps(load(dyi + c, C - c), load(w + c, C - c));
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load(xi + c, C - c), vm), vs);
      __m256 v = _mm256_mul_ps(vs, _mm256_fnmadd_ps(xhat, mgx, _mm256_sub_ps(g, mg)));
      if (accumulate_dx) v = _mm256_add_ps(v, load(dxi + c, C - c));
      store(dxi + c, C - c, v);
    }
  }
}

// Columns [j0, j1) in stripes of up to 4 vectors: the stripe's sums stay in registers while
// every row passes in order.
VIT_AVX2 void param_grads_columns(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                  const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  constexpr int kV = 4;
  for (int64_t c0 = j0; c0 < j1; c0 += 8 * kV) {
    __m256 aw[kV], ab[kV];
    for (int v = 0; v < kV; ++v) aw[v] = ab[v] = _mm256_setzero_ps();
    const int nv = int(std::min<int64_t>(kV, (j1 - c0 + 7) / 8));
    for (int64_t i = 0; i < M; ++i) {
      const __m256 vm = _mm256_set1_ps(mean[i]), vs = _mm256_set1_ps(rstd[i]);
      for (int v = 0; v < nv; ++v) {
        const int64_t c = c0 + 8 * v, n = j1 - c;
        const __m256 g = load(dy + i * C + c, n);
        aw[v] = _mm256_fmadd_ps(_mm256_mul_ps(g, _mm256_sub_ps(load(x + i * C + c, n), vm)), vs, aw[v]);
        ab[v] = _mm256_add_ps(ab[v], g);
      }
    }
    for (int v = 0; v < nv; ++v) {
      const int64_t c = c0 + 8 * v, n = j1 - c;
      store(dw + c, n, _mm256_add_ps(load(dw + c, n), aw[v]));
      store(db + c, n, _mm256_add_ps(load(db + c, n), ab[v]));
    }
  }
}

}  // namespace vit::cpu::avx2
