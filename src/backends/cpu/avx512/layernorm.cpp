// LayerNorm's AVX-512 kernels (layernorm.h): the reference's two-pass formulas summed in 16
// lanes, rows of at most 16 floats transposed in registers, and a one-pass backward.
#include "backends/cpu/layernorm.h"
#include <array>
#include <cmath>
#include "core/check.h"

#include "backends/cpu/avx512/colsum.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/cpu.h"

namespace vit::cpu::avx512 {

namespace {
VIT_AVX512 inline __mmask16 lanes(int64_t c, int64_t C) {
  return c + 16 <= C ? __mmask16(0xFFFF) : simd::tail_mask(C - c);
}

VIT_AVX512 void layernorm_rows_avx512(float* y, float* mean, float* rstd, const float* x, const float* w,
                                      const float* b, int64_t i0, int64_t i1, int64_t C, float eps) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * C;
    float* yi = y + i * C;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(lanes(c, C), xi + c));
    const float m = simd::hsum(acc) / float(C);
    const __m512 vm = _mm512_set1_ps(m);
    acc = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = lanes(c, C);
      const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, xi + c), vm);
      acc = _mm512_fmadd_ps(d, d, acc);
    }
    const float s = 1.f / std::sqrt(simd::hsum(acc) / float(C) + eps);
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = lanes(c, C);
      const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, xi + c), vm), vs);
      _mm512_mask_storeu_ps(
          yi + c, k, _mm512_fmadd_ps(xhat, _mm512_maskz_loadu_ps(k, w + c), _mm512_maskz_loadu_ps(k, b + c)));
    }
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

// Rows [i0, i1) of dx. With Sums, also (rows in order) aw += dy (x - mean) rstd and ab += dy
// per column, the parameter gradients' terms, and cs (if given) += the dx written.
template <bool Sums>
VIT_AVX512 void layernorm_dx_rows_avx512(float* dx, const float* dy, const float* x, const float* mean,
                                         const float* rstd, const float* w, int64_t i0, int64_t i1, int64_t C,
                                         bool accumulate_dx, float* aw = nullptr, float* ab = nullptr,
                                         float* cs = nullptr) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * C;
    const float* dyi = dy + i * C;
    float* dxi = dx + i * C;
    const __m512 vm = _mm512_set1_ps(mean[i]), vs = _mm512_set1_ps(rstd[i]);
    __m512 sg = _mm512_setzero_ps(), sgx = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = lanes(c, C);
      const __m512 d = _mm512_maskz_loadu_ps(k, dyi + c);
      const __m512 g = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(k, w + c));
      const __m512 xc = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, xi + c), vm);
      const __m512 xhat = _mm512_maskz_mul_ps(k, xc, vs);
      sg = _mm512_add_ps(sg, g);
      sgx = _mm512_fmadd_ps(g, xhat, sgx);
      if constexpr (Sums) {
        _mm512_storeu_ps(aw + c, _mm512_fmadd_ps(_mm512_mul_ps(d, xc), vs, _mm512_loadu_ps(aw + c)));
        _mm512_storeu_ps(ab + c, _mm512_add_ps(_mm512_loadu_ps(ab + c), d));
      }
    }
    const __m512 mg = _mm512_set1_ps(simd::hsum(sg) / float(C));
    const __m512 mgx = _mm512_set1_ps(simd::hsum(sgx) / float(C));
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = lanes(c, C);
      const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dyi + c), _mm512_maskz_loadu_ps(k, w + c));
      const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, xi + c), vm), vs);
      __m512 v = _mm512_mul_ps(vs, _mm512_fnmadd_ps(xhat, mgx, _mm512_sub_ps(g, mg)));
      if (accumulate_dx) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, dxi + c));
      _mm512_mask_storeu_ps(dxi + c, k, v);
      if constexpr (Sums)
        if (cs) _mm512_storeu_ps(cs + c, _mm512_add_ps(_mm512_loadu_ps(cs + c), v));
    }
  }
}

}  // namespace

// The whole backward of rows wider than kColsumNarrowN on one thread, in one walk over the
// rows: dx, and on the way the parameter gradients and (dxsum, if given) the column sums of
// the dx written, which the linear layer under the norm needs as its bias gradient. Every
// column sums its rows in order from 0 and then adds into the output, as param_grads_columns
// and colsum_add do: the same bits as the three passes, for one read of dy and x instead of
// three (cifar-seed's training step).
VIT_AVX512 void layernorm_backward_one_pass(float* dx, float* dw, float* db, float* dxsum, const float* dy,
                                            const float* x, const float* mean, const float* rstd,
                                            const float* w, int64_t M, int64_t C, bool accumulate_dx) {
  thread_local Scratch<float> buf;
  const int64_t Cp = (C + 15) / 16 * 16;
  float* aw = grown(buf, 3 * Cp);
  float* ab = aw + Cp;
  float* cs = ab + Cp;
  for (int64_t c = 0; c < 3 * Cp; c += 16) _mm512_storeu_ps(aw + c, _mm512_setzero_ps());
  layernorm_dx_rows_avx512<true>(dx, dy, x, mean, rstd, w, 0, M, C, accumulate_dx, aw, ab,
                                 dxsum ? cs : nullptr);
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 k = lanes(c, C);
    auto add = [&](float* out, const float* acc) VIT_AVX512 {
      _mm512_mask_storeu_ps(out + c, k,
                            _mm512_add_ps(_mm512_maskz_loadu_ps(k, out + c), _mm512_loadu_ps(acc + c)));
    };
    add(dw, aw), add(db, ab);
    if (dxsum) add(dxsum, cs);
  }
}

namespace {
// Rows of at most 16 floats (mnist-seed's 8), 16 rows at a time transposed in registers:
// column j of the block is then one vector, so the mean, variance and scaling are vertical
// operations on 16 rows at once instead of two horizontal sums per row (docs/design.md, "Fast
// kernels and threads"). Sums run over the columns in order (the reference's order).
constexpr int64_t kShortRow = 16;

// 16 rows of exactly 8 floats are 8 vectors of two rows each; three rounds of two-source
// permutes (vpermt2ps, 8 a round) take them to the 8 column vectors and back: 24 shuffles
// each way, against transpose16x16's 64 on 16 masked row loads, half of them moving
// padding. The permutes' indices come from labelling each element (row 8 + column) at each
// round and finding every output lane's element among its two sources.
struct Transpose16x8 {
  alignas(64) int32_t to_cols[6][16], to_rows[6][16];
  Transpose16x8() {
    using L = std::array<int, 16>;
    auto v = [](int p) {
      L l;
      for (int i = 0; i < 16; ++i) l[i] = (2 * p + (i >> 3)) * 8 + (i & 7);
      return l;
    };
    auto w = [](int q, int h) {
      L l;
      for (int i = 0; i < 16; ++i) l[i] = (4 * q + (i >> 2)) * 8 + 4 * h + (i & 3);
      return l;
    };
    auto y = [](int s, int g) {
      L l;
      for (int i = 0; i < 16; ++i) l[i] = (8 * s + (i >> 1)) * 8 + 2 * g + (i & 1);
      return l;
    };
    auto z = [](int c) {
      L l;
      for (int i = 0; i < 16; ++i) l[i] = i * 8 + c;
      return l;
    };
    auto idx = [](int32_t* out, const L& a, const L& b, const L& want) {
      for (int i = 0; i < 16; ++i) {
        out[i] = -1;
        for (int j = 0; j < 16; ++j) {
          if (a[j] == want[i]) out[i] = j;
          if (b[j] == want[i]) out[i] = 16 + j;
        }
        VIT_CHECK(out[i] >= 0, "Transpose16x8: element ", want[i], " is in neither source");
      }
    };
    for (int e = 0; e < 2; ++e) {
      idx(to_cols[e], v(0), v(1), w(0, e));            // round 1: rows 4q..4q+3, columns 4e..4e+3
      idx(to_cols[2 + e], w(0, 0), w(1, 0), y(0, e));  // round 2: rows 8s.., columns 2e, 2e + 1
      idx(to_cols[4 + e], y(0, 0), y(1, 0), z(e));     // round 3: column e of all 16 rows
      idx(to_rows[e], z(0), z(1), y(e, 0));            // and back: rows 8e.. of two columns
      idx(to_rows[2 + e], y(0, 0), y(0, 1), w(e, 0));  // rows 4e.. of four columns
      idx(to_rows[4 + e], w(0, 0), w(0, 1), v(e));     // rows 2e, 2e + 1
    }
  }
};
const Transpose16x8& transpose16x8() {
  static const Transpose16x8 t;
  return t;
}

VIT_AVX512 inline __m512 perm2(const int32_t* idx, __m512 a, __m512 b) {
  return _mm512_permutex2var_ps(a, _mm512_load_si512(idx), b);
}

// r[j] = column j of rows [0, rows) of src (leading dim C); rows past `rows` read as 0.
template <bool kEight>
VIT_AVX512 inline void load_columns(__m512 (&r)[16], const float* src, int64_t rows, int64_t C) {
  if constexpr (!kEight) {
    simd::load_rows16(r, src, C, rows, C);
    simd::transpose16x16(r);
  } else {
    const Transpose16x8& t = transpose16x8();
    __m512 v[8], w[8];
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) v[p] = _mm512_maskz_loadu_ps(simd::lanes((rows - 2 * p) * 8), src + 16 * p);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {  // w[2q + h]: rows 4q.., columns 4h..
      w[2 * q] = perm2(t.to_cols[0], v[2 * q], v[2 * q + 1]);
      w[2 * q + 1] = perm2(t.to_cols[1], v[2 * q], v[2 * q + 1]);
    }
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s)  // v[4s + 2h + g]: rows 8s.., columns 4h + 2g, + 1
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
        for (int g = 0; g < 2; ++g)
          v[4 * s + 2 * h + g] = perm2(t.to_cols[2 + g], w[4 * s + h], w[4 * s + 2 + h]);
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {  // columns c, c + 1: from rows 0.. (v[c / 2]) and 8.. (v[4 + c / 2])
      r[c] = perm2(t.to_cols[4], v[c / 2], v[4 + c / 2]);
      r[c + 1] = perm2(t.to_cols[5], v[c / 2], v[4 + c / 2]);
    }
  }
}

// The inverse: rows [0, rows) of dst from columns r[j], j < C; plus dst's values when add.
template <bool kEight>
VIT_AVX512 inline void store_columns(float* dst, __m512 (&r)[16], int64_t rows, int64_t C, bool add) {
  if constexpr (!kEight) {
    simd::transpose16x16(r);
    if (add) {
      const __mmask16 c = simd::lanes(C);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        if (i < rows) r[i] = _mm512_add_ps(r[i], _mm512_maskz_loadu_ps(c, dst + i * C));
    }
    simd::store_rows16(dst, C, r, rows, C);
  } else {
    const Transpose16x8& t = transpose16x8();
    __m512 v[8], w[8];
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {
      v[c / 2] = perm2(t.to_rows[0], r[c], r[c + 1]);
      v[4 + c / 2] = perm2(t.to_rows[1], r[c], r[c + 1]);
    }
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        w[4 * s + h] = perm2(t.to_rows[2], v[4 * s + 2 * h], v[4 * s + 2 * h + 1]);
        w[4 * s + 2 + h] = perm2(t.to_rows[3], v[4 * s + 2 * h], v[4 * s + 2 * h + 1]);
      }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      v[2 * q] = perm2(t.to_rows[4], w[2 * q], w[2 * q + 1]);
      v[2 * q + 1] = perm2(t.to_rows[5], w[2 * q], w[2 * q + 1]);
    }
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const __mmask16 m = simd::lanes((rows - 2 * p) * 8);
      if (add) v[p] = _mm512_add_ps(v[p], _mm512_maskz_loadu_ps(m, dst + 16 * p));
      _mm512_mask_storeu_ps(dst + 16 * p, m, v[p]);
    }
  }
}

template <bool kEight>
VIT_AVX512 void layernorm_short_rows(float* y, float* mean, float* rstd, const float* x, const float* w,
                                     const float* b, int64_t i0, int64_t i1, int64_t C, float eps) {
  const __m512 vc = _mm512_set1_ps(float(C)), veps = _mm512_set1_ps(eps), one = _mm512_set1_ps(1.f);
  for (int64_t i = i0; i < i1; i += 16) {
    const int64_t rows = i1 - i < 16 ? i1 - i : 16;
    __m512 r[16];
    load_columns<kEight>(r, x + i * C, rows, C);  // r[j]: column j of the 16 rows
    __m512 m = _mm512_setzero_ps(), v = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < C) m = _mm512_add_ps(m, r[j]);
    m = _mm512_div_ps(m, vc);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < C) {
        r[j] = _mm512_sub_ps(r[j], m);
        v = _mm512_fmadd_ps(r[j], r[j], v);
      }
    const __m512 rs = _mm512_div_ps(one, _mm512_sqrt_ps(_mm512_add_ps(_mm512_div_ps(v, vc), veps)));
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < C) r[j] = _mm512_fmadd_ps(_mm512_mul_ps(r[j], rs), _mm512_set1_ps(w[j]), _mm512_set1_ps(b[j]));
    store_columns<kEight>(y + i * C, r, rows, C, false);
    const __mmask16 k = simd::lanes(rows);
    if (mean) _mm512_mask_storeu_ps(mean + i, k, m);
    if (rstd) _mm512_mask_storeu_ps(rstd + i, k, rs);
  }
}

// dx for rows of at most 16 floats, 16 rows at a time transposed like the forward.
template <bool kEight>
VIT_AVX512 void layernorm_dx_short_rows(float* dx, const float* dy, const float* x, const float* mean,
                                        const float* rstd, const float* w, int64_t i0, int64_t i1, int64_t C,
                                        bool accumulate_dx) {
  const __m512 vc = _mm512_set1_ps(float(C));
  for (int64_t i = i0; i < i1; i += 16) {
    const int64_t rows = i1 - i < 16 ? i1 - i : 16;
    const __mmask16 k = simd::lanes(rows);
    const __m512 m = _mm512_maskz_loadu_ps(k, mean + i), s = _mm512_maskz_loadu_ps(k, rstd + i);
    __m512 g[16], xh[16];
    load_columns<kEight>(g, dy + i * C, rows, C);
    load_columns<kEight>(xh, x + i * C, rows, C);
    __m512 sg = _mm512_setzero_ps(), sgx = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < C) {
        g[j] = _mm512_mul_ps(g[j], _mm512_set1_ps(w[j]));
        xh[j] = _mm512_mul_ps(_mm512_sub_ps(xh[j], m), s);
        sg = _mm512_add_ps(sg, g[j]);
        sgx = _mm512_fmadd_ps(g[j], xh[j], sgx);
      }
    const __m512 mg = _mm512_div_ps(sg, vc), mgx = _mm512_div_ps(sgx, vc);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < C) g[j] = _mm512_mul_ps(s, _mm512_fnmadd_ps(xh[j], mgx, _mm512_sub_ps(g[j], mg)));
    store_columns<kEight>(dx + i * C, g, rows, C, accumulate_dx);
  }
}

// One row's share of the parameter gradients, NV vectors from its column c0 (g = dy and
// xi = x there): aw += g (x - mean) rstd, ab += g.
template <int NV>
VIT_AVX512 inline void grads_row(__m512* aw, __m512* ab, const __mmask16* m, const float* g, const float* xi,
                                 float mean, float rstd) {
  const __m512 vm = _mm512_set1_ps(mean), vs = _mm512_set1_ps(rstd);
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const __m512 gv = _mm512_maskz_loadu_ps(m[v], g + 16 * v);
    const __m512 xc = _mm512_sub_ps(_mm512_maskz_loadu_ps(m[v], xi + 16 * v), vm);
    aw[v] = _mm512_fmadd_ps(_mm512_mul_ps(gv, xc), vs, aw[v]);
    ab[v] = _mm512_add_ps(ab[v], gv);
  }
}

// Columns [j0, j1) of layernorm_param_grads, 4 vectors of dw and of db in registers, every
// row in order (the plain loop's order and rounding per column).
VIT_AVX512 void param_grads_wide(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                 const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  constexpr int kV = 4;
  for (int64_t c0 = j0; c0 < j1; c0 += 16 * kV) {
    __m512 aw[kV], ab[kV];
    __mmask16 m[kV];
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) {
      m[v] = simd::lanes(j1 - c0 - 16 * v);
      aw[v] = ab[v] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < M; ++i)
      grads_row<kV>(aw, ab, m, dy + i * C + c0, x + i * C + c0, mean[i], rstd[i]);
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) {
      float *w = dw + c0 + 16 * v, *b = db + c0 + 16 * v;
      _mm512_mask_storeu_ps(w, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], w), aw[v]));
      _mm512_mask_storeu_ps(b, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], b), ab[v]));
    }
  }
}

// The same for columns [j0, j1) of at most NV vectors (mnist-seed's 8): rows go in turn to
// 4 sets of accumulators, summed at the end, so the adds do not wait on each other.
template <int NV>
VIT_AVX512 void param_grads_narrow(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                   const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  constexpr int kP = 4;
  __m512 aw[kP][NV], ab[kP][NV];
  __mmask16 m[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    m[v] = simd::lanes(j1 - j0 - 16 * v);
#pragma GCC unroll 4
    for (int p = 0; p < kP; ++p) aw[p][v] = ab[p][v] = _mm512_setzero_ps();
  }
  auto row = [&](int p, int64_t i) {
    grads_row<NV>(aw[p], ab[p], m, dy + i * C + j0, x + i * C + j0, mean[i], rstd[i]);
  };
  int64_t i = 0;
  for (; i + kP <= M; i += kP)
#pragma GCC unroll 4
    for (int p = 0; p < kP; ++p) row(p, i + p);
  for (; i < M; ++i) row(0, i);
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    float *w = dw + j0 + 16 * v, *b = db + j0 + 16 * v;
    const __m512 sw = _mm512_add_ps(_mm512_add_ps(aw[0][v], aw[1][v]), _mm512_add_ps(aw[2][v], aw[3][v]));
    const __m512 sb = _mm512_add_ps(_mm512_add_ps(ab[0][v], ab[1][v]), _mm512_add_ps(ab[2][v], ab[3][v]));
    _mm512_mask_storeu_ps(w, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], w), sw));
    _mm512_mask_storeu_ps(b, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], b), sb));
  }
}

}  // namespace

// The row phases for every block of rows of at most 32 floats and none of wider ones,
// whatever the split into blocks: the sums do not depend on the thread count.
void param_grads_columns(float* dw, float* db, const float* dy, const float* x, const float* mean,
                         const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  if (C > 32) return param_grads_wide(dw, db, dy, x, mean, rstd, M, C, j0, j1);
  switch ((j1 - j0 + 15) / 16) {
    case 0: return;
    case 1: return param_grads_narrow<1>(dw, db, dy, x, mean, rstd, M, C, j0, j1);
    case 2: return param_grads_narrow<2>(dw, db, dy, x, mean, rstd, M, C, j0, j1);
    default: return param_grads_wide(dw, db, dy, x, mean, rstd, M, C, j0, j1);
  }
}

void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                    int64_t i0, int64_t i1, int64_t C, float eps) {
  if (C == 8)
    layernorm_short_rows<true>(y, mean, rstd, x, w, b, i0, i1, C, eps);
  else if (C <= kShortRow)
    layernorm_short_rows<false>(y, mean, rstd, x, w, b, i0, i1, C, eps);
  else
    layernorm_rows_avx512(y, mean, rstd, x, w, b, i0, i1, C, eps);
}

void layernorm_dx_rows(float* dx, const float* dy, const float* x, const float* mean, const float* rstd,
                       const float* w, int64_t i0, int64_t i1, int64_t C, bool accumulate_dx) {
  if (C == 8)
    layernorm_dx_short_rows<true>(dx, dy, x, mean, rstd, w, i0, i1, C, accumulate_dx);
  else if (C <= kShortRow)
    layernorm_dx_short_rows<false>(dx, dy, x, mean, rstd, w, i0, i1, C, accumulate_dx);
  else
    layernorm_dx_rows_avx512<false>(dx, dy, x, mean, rstd, w, i0, i1, C, accumulate_dx);
}

// Rows wider than colsum_add's narrow ones: their column passes sum every row in order.
bool one_pass_backward_fits(int64_t C) {
  return C > kColsumNarrowN;
}

}  // namespace vit::cpu::avx512
