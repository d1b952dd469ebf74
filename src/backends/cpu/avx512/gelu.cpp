// Exact GELU's AVX-512 kernels (gelu.h): simd.h's erf (absolute error <= 1.5e-7), 16 lanes,
// tails under masks.
#include "backends/cpu/gelu.h"
#include "backends/cpu/avx512/colsum.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/cpu.h"

namespace vit::cpu::avx512 {

namespace {
using simd::gelu_from;  // GELU(v) = v Phi(v) = 0.5 v (1 + erf(v / sqrt 2)), from that erf

// d/dx [x Phi(x)] = Phi(x) + x phi(x); erf512 also returns exp(-x^2/2) for phi.
VIT_AVX512 inline __m512 gelu_grad_from(__m512 v, __m512 erf, __m512 e) {
  const __m512 cdf = _mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_add_ps(_mm512_set1_ps(1.f), erf));
  return _mm512_fmadd_ps(_mm512_mul_ps(v, _mm512_set1_ps(kInvSqrt2Pi)), e, cdf);
}

VIT_AVX512 inline __m512 gelu_grad512(__m512 v) {
  __m512 e;
  const __m512 erf = simd::erf512(_mm512_mul_ps(v, _mm512_set1_ps(kInvSqrt2)), &e);
  return gelu_grad_from(v, erf, e);
}

// Rows [r0, r1): v = h + bias, y = GELU(v), and h = GELU'(v) when Grad: the erf and exp
// that the forward computes anyway give the derivative for two more instructions.
template <bool Grad>
VIT_AVX512 void bias_gelu_rows_t(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1) {
  const __m512 s = _mm512_set1_ps(kInvSqrt2);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 16) {
      const __mmask16 m = simd::lanes(N - j);
      const int64_t i = r * N + j;
      const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, h + i), _mm512_maskz_loadu_ps(m, bias + j));
      __m512 e;
      const __m512 erf = simd::erf512(_mm512_mul_ps(v, s), &e);
      _mm512_mask_storeu_ps(y + i, m, gelu_from(v, erf));
      if constexpr (Grad) _mm512_mask_storeu_ps(h + i, m, gelu_grad_from(v, erf, e));
    }
}

// Columns [j0, j1) of dx = dy * grad over all M rows, summing dx's columns into db on the way
// (and clearing grad behind, with Clear).
template <bool Clear>
VIT_AVX512 void mul_colsum_columns(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                   int64_t j0, int64_t j1) {
  colsum_by_rows(db, M, j0, j1, [&](int64_t r, int64_t c, __mmask16 m) VIT_AVX512 {
    const int64_t i = r * N + c;
    const __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), _mm512_maskz_loadu_ps(m, grad + i));
    _mm512_mask_storeu_ps(dx + i, m, d);
    if constexpr (Clear) _mm512_mask_storeu_ps(grad + i, m, _mm512_setzero_ps());
    return d;
  });
}

// The same for matrices of at most kColsumNarrowN columns, in colsum_add's row phases (the
// same bits as the multiply followed by colsum_add); [j0, j1) is at most NV vectors.
template <int NV, bool Clear>
VIT_AVX512 void mul_colsum_narrow(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                  int64_t j0, int64_t j1) {
  colsum_narrow_by_rows<NV>(db, M, j0, j1, [&](int64_t r, int64_t c, __mmask16 m) VIT_AVX512 {
    const int64_t i = r * N + c;
    const __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), _mm512_maskz_loadu_ps(m, grad + i));
    _mm512_mask_storeu_ps(dx + i, m, d);
    if constexpr (Clear) _mm512_mask_storeu_ps(grad + i, m, _mm512_setzero_ps());
    return d;
  });
}

template <bool Clear>
VIT_AVX512 void mul_colsum_narrow_block(float* dx, float* db, const float* dy, float* grad, int64_t M,
                                        int64_t N, int64_t j0, int64_t j1) {
  switch ((j1 - j0 + 15) / 16) {
    case 0: return;
    case 1: return mul_colsum_narrow<1, Clear>(dx, db, dy, grad, M, N, j0, j1);
    case 2: return mul_colsum_narrow<2, Clear>(dx, db, dy, grad, M, N, j0, j1);
    case 3: return mul_colsum_narrow<3, Clear>(dx, db, dy, grad, M, N, j0, j1);
    default: return mul_colsum_narrow<4, Clear>(dx, db, dy, grad, M, N, j0, j1);
  }
}
}  // namespace

VIT_AVX512 void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = i + 16 <= i1 ? __mmask16(0xFFFF) : simd::tail_mask(i1 - i);
    _mm512_mask_storeu_ps(y + i, m, simd::gelu512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

VIT_AVX512 void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = i + 16 <= i1 ? __mmask16(0xFFFF) : simd::tail_mask(i1 - i);
    const __m512 g = gelu_grad512(_mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(dx + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), g));
  }
}

void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                    bool keep_grad) {
  if (keep_grad)
    bias_gelu_rows_t<true>(y, h, bias, N, r0, r1);
  else
    bias_gelu_rows_t<false>(y, h, bias, N, r0, r1);
}

namespace {
// GELU's tanh form or QuickGELU, as avx2/gelu.cpp's act_of: exp of -|z| (or -2|u|) alone.
template <Activation A, bool G>
VIT_AVX512 inline __m512 act_of(__m512 v, __m512* g) {
  const __m512 one = _mm512_set1_ps(1.f), sign_bit = _mm512_set1_ps(-0.f);
  if constexpr (A == Activation::quick_gelu) {
    const __m512 z = _mm512_mul_ps(v, _mm512_set1_ps(kQuick));
    const __m512 e = simd::exp512_nonpos(_mm512_or_ps(z, sign_bit));  // exp(-|z|)
    const __m512 r = _mm512_div_ps(one, _mm512_add_ps(one, e));
    const __m512 s =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_mul_ps(e, r), r);
    if constexpr (G) *g = _mm512_fmadd_ps(_mm512_mul_ps(z, s), _mm512_sub_ps(one, s), s);
    return _mm512_mul_ps(v, s);
  } else {
    const __m512 v2 = _mm512_mul_ps(v, v);
    const __m512 u = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                   _mm512_fmadd_ps(_mm512_mul_ps(v2, v), _mm512_set1_ps(kTanhCubic), v));
    const __m512 e = simd::exp512_nonpos(_mm512_or_ps(_mm512_add_ps(u, u), sign_bit));  // exp(-2|u|)
    const __m512 a = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
    const __m512 t = _mm512_or_ps(a, _mm512_and_ps(u, sign_bit));
    const __m512 half_v = _mm512_mul_ps(_mm512_set1_ps(0.5f), v);
    if constexpr (G) {
      const __m512 du = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                      _mm512_fmadd_ps(v2, _mm512_set1_ps(3.f * kTanhCubic), one));
      *g = _mm512_fmadd_ps(_mm512_mul_ps(half_v, _mm512_fnmadd_ps(t, t, one)), du,
                           _mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_add_ps(one, t)));
    }
    return _mm512_mul_ps(half_v, _mm512_add_ps(one, t));
  }
}

template <Activation A, bool G>
VIT_AVX512 void act_rows_t(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 16) {
      const __mmask16 m = simd::lanes(N - j);
      const int64_t i = r * N + j;
      const __m512 x = _mm512_maskz_loadu_ps(m, h + i);
      const __m512 v = bias ? _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + j)) : x;
      __m512 g;
      _mm512_mask_storeu_ps(y + i, m, act_of<A, G>(v, &g));
      if constexpr (G) _mm512_mask_storeu_ps(h + i, m, g);
    }
}
}  // namespace

void act_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1, bool keep_grad,
              Activation act) {
  with_activation(act, keep_grad, [&]<Activation A, bool G>() { act_rows_t<A, G>(y, h, bias, N, r0, r1); });
}

void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad) {
  // colsum_add's blocks of columns and order of rows (narrow matrices in row phases); grad is
  // cleared behind the multiply, in the same pass.
  by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) {
    if (N > kColsumNarrowN)
      return clear_grad ? mul_colsum_columns<true>(dx, db, dy, grad, M, N, j0, j1)
                        : mul_colsum_columns<false>(dx, db, dy, grad, M, N, j0, j1);
    return clear_grad ? mul_colsum_narrow_block<true>(dx, db, dy, grad, M, N, j0, j1)
                      : mul_colsum_narrow_block<false>(dx, db, dy, grad, M, N, j0, j1);
  });
}

}  // namespace vit::cpu::avx512
