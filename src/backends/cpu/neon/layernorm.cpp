// LayerNorm's NEON kernels (layernorm.h): the reference's two-pass formulas summed in 4 lanes,
// one row at a time (rows of 8 floats: 4 rows at a time, transposed); the parameter gradients
// column by column with every row in order.
#include <algorithm>
#include <cmath>

#include "backends/cpu/layernorm.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// Rows of exactly 8 floats (mnist-seed's C), 4 rows at a time transposed in registers
// (avx2/layernorm.cpp's short rows in 4 lanes): column j of the block is then one vector, so
// the mean, variance and scaling are vertical operations on 4 rows at once instead of two
// horizontal sums per row. Sums run over the columns in order (the reference's order), the
// same operations as the AVX2 kernel's lanes.
constexpr int64_t kShortC = 8;

// r[i] holds 4 floats of row i of a 4 x 4 block -> r[j] holds column j (its own inverse).
inline void transpose4x4(float32x4_t& r0, float32x4_t& r1, float32x4_t& r2, float32x4_t& r3) {
  const float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1), t2 = vtrn1q_f32(r2, r3),
                    t3 = vtrn2q_f32(r2, r3);
  auto f64 = [](float32x4_t v) { return vreinterpretq_f64_f32(v); };
  r0 = vreinterpretq_f32_f64(vtrn1q_f64(f64(t0), f64(t2)));
  r1 = vreinterpretq_f32_f64(vtrn1q_f64(f64(t1), f64(t3)));
  r2 = vreinterpretq_f32_f64(vtrn2q_f64(f64(t0), f64(t2)));
  r3 = vreinterpretq_f32_f64(vtrn2q_f64(f64(t1), f64(t3)));
}

// c[i] holds row i of a 4 x 8 block (columns [0, 4) in c[i], [4, 8) in c[i + 4]) -> c[j]
// holds column j (its own inverse).
inline void transpose4x8(float32x4_t (&c)[8]) {
  transpose4x4(c[0], c[1], c[2], c[3]);
  transpose4x4(c[4], c[5], c[6], c[7]);
}

// The columns of the rows <= 4 at p (8 floats each, contiguous; rows past them are zeros).
inline void load_columns8(float32x4_t (&c)[8], const float* p, int64_t rows) {
  for (int i = 0; i < 4; ++i) {
    c[i] = i < rows ? vld1q_f32(p + 8 * i) : vdupq_n_f32(0.f);
    c[i + 4] = i < rows ? vld1q_f32(p + 8 * i + 4) : vdupq_n_f32(0.f);
  }
  transpose4x8(c);
}

// The rows <= 4 of a transposed block back to p (the inverse of load_columns8); with
// accumulate, added onto what p holds.
inline void store_rows8(float* p, float32x4_t (&c)[8], int64_t rows, bool accumulate) {
  transpose4x8(c);
  for (int i = 0; i < 4 && i < rows; ++i)
    for (int h = 0; h < 2; ++h) {
      float* out = p + 8 * i + 4 * h;
      const float32x4_t v = c[i + 4 * h];
      vst1q_f32(out, accumulate ? vaddq_f32(v, vld1q_f32(out)) : v);
    }
}

// Rows [i0, i1) of layernorm_rows for C = 8, a last block of fewer than 4 rows padded with
// zero rows: every row takes the same arithmetic whatever block it falls in, so the bits do
// not depend on how callers split the rows (threads, the fused residual's samples).
void layernorm_rows8(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                     int64_t i0, int64_t i1, float eps) {
  const float32x4_t vc = vdupq_n_f32(float(kShortC)), veps = vdupq_n_f32(eps), one = vdupq_n_f32(1.f);
  for (int64_t i = i0; i < i1; i += 4) {
    const int64_t rows = std::min<int64_t>(4, i1 - i);
    float32x4_t r[8];
    load_columns8(r, x + i * kShortC, rows);
    float32x4_t m = r[0], v = vdupq_n_f32(0.f);
    for (int j = 1; j < 8; ++j) m = vaddq_f32(m, r[j]);
    m = vdivq_f32(m, vc);
    for (int j = 0; j < 8; ++j) {
      r[j] = vsubq_f32(r[j], m);
      v = vfmaq_f32(v, r[j], r[j]);
    }
    const float32x4_t rs = vdivq_f32(one, vsqrtq_f32(vaddq_f32(vdivq_f32(v, vc), veps)));
    for (int j = 0; j < 8; ++j) r[j] = vfmaq_f32(vdupq_n_f32(b[j]), vmulq_f32(r[j], rs), vdupq_n_f32(w[j]));
    store_rows8(y + i * kShortC, r, rows, false);
    if (mean) store(mean + i, rows, m);
    if (rstd) store(rstd + i, rows, rs);
  }
}

// Rows [i0, i1) of layernorm_dx_rows for C = 8, blocks as layernorm_rows8's.
void layernorm_dx_rows8(float* dx, const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* w, int64_t i0, int64_t i1, bool accumulate_dx) {
  const float32x4_t vc = vdupq_n_f32(float(kShortC));
  for (int64_t i = i0; i < i1; i += 4) {
    const int64_t rows = std::min<int64_t>(4, i1 - i);
    const float32x4_t m = load(mean + i, rows), s = load(rstd + i, rows);
    float32x4_t g[8], xh[8];
    load_columns8(g, dy + i * kShortC, rows);
    load_columns8(xh, x + i * kShortC, rows);
    float32x4_t sg = vdupq_n_f32(0.f), sgx = vdupq_n_f32(0.f);
    for (int j = 0; j < 8; ++j) {
      g[j] = vmulq_f32(g[j], vdupq_n_f32(w[j]));
      xh[j] = vmulq_f32(vsubq_f32(xh[j], m), s);
      sg = vaddq_f32(sg, g[j]);
      sgx = vfmaq_f32(sgx, g[j], xh[j]);
    }
    const float32x4_t mg = vdivq_f32(sg, vc), mgx = vdivq_f32(sgx, vc);
    for (int j = 0; j < 8; ++j) g[j] = vmulq_f32(s, vfmsq_f32(vsubq_f32(g[j], mg), xh[j], mgx));
    store_rows8(dx + i * kShortC, g, rows, accumulate_dx);
  }
}
}  // namespace

void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                    int64_t i0, int64_t i1, int64_t C, float eps) {
  if (C == kShortC) return layernorm_rows8(y, mean, rstd, x, w, b, i0, i1, eps);
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
  if (C == kShortC) return layernorm_dx_rows8(dx, dy, x, mean, rstd, w, i0, i1, accumulate_dx);
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
