// LayerNorm's NEON kernels (layernorm.h): the reference's two-pass formulas summed in 4 lanes,
// one row at a time; the parameter gradients column by column with every row in order.
#include <algorithm>
#include <cmath>

#include "backends/cpu/layernorm.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                    int64_t i0, int64_t i1, int64_t C, float eps) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * C;
    float* yi = y + i * C;
    float32x4_t acc = vdupq_n_f32(0.f);
    for (int64_t c = 0; c < C; c += 4) acc = vaddq_f32(acc, load(xi + c, C - c));
    const float m = hsum(acc) / float(C);
    const float32x4_t vm = vdupq_n_f32(m);
    acc = vdupq_n_f32(0.f);
    for (int64_t c = 0; c < C; c += 4) {
      const float32x4_t d = vreinterpretq_f32_u32(
          vandq_u32(tail_mask(C - c), vreinterpretq_u32_f32(vsubq_f32(load(xi + c, C - c), vm))));
      acc = vfmaq_f32(acc, d, d);
    }
    const float s = 1.f / std::sqrt(hsum(acc) / float(C) + eps);
    for (int64_t c = 0; c < C; c += 4) {
      const float32x4_t xhat = vmulq_n_f32(vsubq_f32(load(xi + c, C - c), vm), s);
      store(yi + c, C - c, vfmaq_f32(load(b + c, C - c), xhat, load(w + c, C - c)));
    }
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w, xhat = (x - mean) rstd.
void layernorm_dx_rows(float* dx, const float* dy, const float* x, const float* mean, const float* rstd,
                       const float* w, int64_t i0, int64_t i1, int64_t C, bool accumulate_dx) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * C;
    const float* dyi = dy + i * C;
    float* dxi = dx + i * C;
    const float32x4_t vm = vdupq_n_f32(mean[i]);
    const float s = rstd[i];
    float32x4_t sg = vdupq_n_f32(0.f), sgx = vdupq_n_f32(0.f);
    for (int64_t c = 0; c < C; c += 4) {  // lanes past C load as 0: g = 0 there
      const float32x4_t g = vmulq_f32(load(dyi + c, C - c), load(w + c, C - c));
      const float32x4_t xhat = vmulq_n_f32(vsubq_f32(load(xi + c, C - c), vm), s);
      sg = vaddq_f32(sg, g);
      sgx = vfmaq_f32(sgx, g, xhat);
    }
    const float32x4_t mg = vdupq_n_f32(hsum(sg) / float(C)), mgx = vdupq_n_f32(hsum(sgx) / float(C));
    for (int64_t c = 0; c < C; c += 4) {
      const float32x4_t g = vmulq_f32(load(dyi + c, C - c), load(w + c, C - c));
      const float32x4_t xhat = vmulq_n_f32(vsubq_f32(load(xi + c, C - c), vm), s);
      float32x4_t v = vmulq_n_f32(vfmsq_f32(vsubq_f32(g, mg), xhat, mgx), s);
      if (accumulate_dx) v = vaddq_f32(v, load(dxi + c, C - c));
      store(dxi + c, C - c, v);
    }
  }
}

void param_grads_columns(float* dw, float* db, const float* dy, const float* x, const float* mean,
                         const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  constexpr int kV = 4;
  for (int64_t c0 = j0; c0 < j1; c0 += 4 * kV) {
    float32x4_t aw[kV], ab[kV];
    for (int v = 0; v < kV; ++v) aw[v] = ab[v] = vdupq_n_f32(0.f);
    const int nv = int(std::min<int64_t>(kV, (j1 - c0 + 3) / 4));
    for (int64_t i = 0; i < M; ++i) {
      const float32x4_t vm = vdupq_n_f32(mean[i]);
      const float s = rstd[i];
      for (int v = 0; v < nv; ++v) {
        const int64_t c = c0 + 4 * v, n = j1 - c;
        const float32x4_t g = load(dy + i * C + c, n);
        aw[v] = vfmaq_n_f32(aw[v], vmulq_f32(g, vsubq_f32(load(x + i * C + c, n), vm)), s);
        ab[v] = vaddq_f32(ab[v], g);
      }
    }
    for (int v = 0; v < nv; ++v) {
      const int64_t c = c0 + 4 * v, n = j1 - c;
      store(dw + c, n, vaddq_f32(load(dw + c, n), aw[v]));
      store(db + c, n, vaddq_f32(load(db + c, n), ab[v]));
    }
  }
}

}  // namespace vit::cpu::neon
