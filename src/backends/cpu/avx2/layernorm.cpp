// LayerNorm's AVX2 + FMA kernels (layernorm.h): the reference's two-pass formulas (mean,
// then the centred variance) summed in 8 lanes, one row at a time (rows of 8 floats: 8 rows at
// a time, transposed); the parameter gradients
// column by column with every row in order, as the reference adds them.
#include <algorithm>
#include <cmath>

#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/kernel_table.h"  // with_constant
#include "backends/cpu/layernorm.h"

namespace vit::cpu::avx2 {

namespace {
// Rows of exactly 8 floats (mnist-seed's C), 8 rows at a time transposed in registers
// (avx512/layernorm.cpp's short rows in 8 lanes): column j of the block is then one vector,
// so the mean, variance and scaling are vertical operations on 8 rows at once instead of two
// horizontal sums per row. Sums run over the columns in order (the reference's order).
constexpr int64_t kShortC = 8;

// The columns of the rows <= 8 at p (8 floats each, contiguous; rows past them are zeros).
VIT_AVX2 inline void load_columns8(__m256 (&r)[8], const float* p, int64_t rows) {
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = i < rows ? _mm256_loadu_ps(p + 8 * i) : _mm256_setzero_ps();
  transpose8x8(r);
}

// Rows [i0, i1) of layernorm_rows for C = 8, a last block of fewer than 8 rows padded with
// zero rows: every row takes the same arithmetic whatever block it falls in, so the bits do
// not depend on how callers split the rows (threads, the fused residual's samples).
VIT_AVX2 void layernorm_rows8(float* y, float* mean, float* rstd, const float* x, const float* w,
                              const float* b, int64_t i0, int64_t i1, float eps) {
  const __m256 vc = _mm256_set1_ps(float(kShortC)), veps = _mm256_set1_ps(eps), one = _mm256_set1_ps(1.f);
  for (int64_t i = i0; i < i1; i += 8) {
    const int64_t rows = std::min<int64_t>(8, i1 - i);
    __m256 r[8];
    load_columns8(r, x + i * kShortC, rows);
    __m256 m = r[0], v = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int j = 1; j < 8; ++j) m = _mm256_add_ps(m, r[j]);
    m = _mm256_div_ps(m, vc);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      r[j] = _mm256_sub_ps(r[j], m);
      v = _mm256_fmadd_ps(r[j], r[j], v);
    }
    const __m256 rs = _mm256_div_ps(one, _mm256_sqrt_ps(_mm256_add_ps(_mm256_div_ps(v, vc), veps)));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      r[j] = _mm256_fmadd_ps(_mm256_mul_ps(r[j], rs), _mm256_set1_ps(w[j]), _mm256_set1_ps(b[j]));
    transpose8x8(r);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      if (k < rows) _mm256_storeu_ps(y + (i + k) * kShortC, r[k]);
    if (mean) store(mean + i, rows, m);
    if (rstd) store(rstd + i, rows, rs);
  }
}

// Rows [i0, i1) of layernorm_dx_rows for C = 8, blocks as layernorm_rows8's.
VIT_AVX2 void layernorm_dx_rows8(float* dx, const float* dy, const float* x, const float* mean,
                                 const float* rstd, const float* w, int64_t i0, int64_t i1,
                                 bool accumulate_dx) {
  const __m256 vc = _mm256_set1_ps(float(kShortC));
  for (int64_t i = i0; i < i1; i += 8) {
    const int64_t rows = std::min<int64_t>(8, i1 - i);
    const __m256 m = load(mean + i, rows), s = load(rstd + i, rows);
    __m256 g[8], xh[8];
    load_columns8(g, dy + i * kShortC, rows);
    load_columns8(xh, x + i * kShortC, rows);
    __m256 sg = _mm256_setzero_ps(), sgx = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      g[j] = _mm256_mul_ps(g[j], _mm256_set1_ps(w[j]));
      xh[j] = _mm256_mul_ps(_mm256_sub_ps(xh[j], m), s);
      sg = _mm256_add_ps(sg, g[j]);
      sgx = _mm256_fmadd_ps(g[j], xh[j], sgx);
    }
    const __m256 mg = _mm256_div_ps(sg, vc), mgx = _mm256_div_ps(sgx, vc);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      g[j] = _mm256_mul_ps(s, _mm256_fnmadd_ps(xh[j], mgx, _mm256_sub_ps(g[j], mg)));
    transpose8x8(g);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {  // no early break: the loop must unroll to keep g in registers
      float* out = dx + (i + k) * kShortC;
      if (k < rows) _mm256_storeu_ps(out, accumulate_dx ? _mm256_add_ps(g[k], _mm256_loadu_ps(out)) : g[k]);
    }
  }
}
}  // namespace

VIT_AVX2 void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w,
                             const float* b, int64_t i0, int64_t i1, int64_t C, float eps) {
  if (C == kShortC) return layernorm_rows8(y, mean, rstd, x, w, b, i0, i1, eps);
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
  if (C == kShortC) return layernorm_dx_rows8(dx, dy, x, mean, rstd, w, i0, i1, accumulate_dx);
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

namespace {
// Columns [c0, j1) of param_grads_columns, NV <= 4 vectors (the last one masked): the
// stripe's sums stay in registers while every row passes in order. NV is a template
// parameter so that every loop over the vectors unrolls: with a run-time count GCC kept aw
// and ab in stack arrays, stored and reloaded on every row (docs/design.md, "Instruction sets").
template <int NV>
VIT_AVX2 void param_grads_stripe(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                 const float* rstd, int64_t M, int64_t C, int64_t c0, int64_t j1) {
  __m256 aw[NV], ab[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) aw[v] = ab[v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < M; ++i) {
    const __m256 vm = _mm256_set1_ps(mean[i]), vs = _mm256_set1_ps(rstd[i]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int64_t c = c0 + 8 * v, n = j1 - c;
      const __m256 g = load(dy + i * C + c, n);
      aw[v] = _mm256_fmadd_ps(_mm256_mul_ps(g, _mm256_sub_ps(load(x + i * C + c, n), vm)), vs, aw[v]);
      ab[v] = _mm256_add_ps(ab[v], g);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const int64_t c = c0 + 8 * v, n = j1 - c;
    store(dw + c, n, _mm256_add_ps(load(dw + c, n), aw[v]));
    store(db + c, n, _mm256_add_ps(load(db + c, n), ab[v]));
  }
}
}  // namespace

// Columns [j0, j1) in stripes of up to 4 vectors, every row in order per column.
VIT_AVX2 void param_grads_columns(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                  const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  for (int64_t c0 = j0; c0 < j1; c0 += 32)
    with_constant<1, 2, 3, 4>((std::min<int64_t>(j1 - c0, 32) + 7) / 8, [&]<int NV>() {
      param_grads_stripe<NV>(dw, db, dy, x, mean, rstd, M, C, c0, j1);
    });
}

}  // namespace vit::cpu::avx2
