// Exact GELU (nn.GELU(approximate='none')), forward and backward: the plain reference
// (std::erf) and an AVX-512 version (simd.h's erf, absolute error <= 1.5e-7 on erf).
#include <algorithm>
#include <cmath>

#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/avx512/colsum.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "vit/core/threads.h"

namespace vit::cpu {

namespace {
using simd::kInvSqrt2;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

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

// One chunk [i0, i1) of the forward; the tail runs with masked loads and stores.
VIT_AVX512 void gelu_forward_avx512(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = i + 16 <= i1 ? __mmask16(0xFFFF) : simd::tail_mask(i1 - i);
    _mm512_mask_storeu_ps(y + i, m, simd::gelu512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// Rows [r0, r1): v = h + bias, y = GELU(v), and h = GELU'(v) when Grad: the erf and exp
// that the forward computes anyway give the derivative for two more instructions.
template <bool Grad>
VIT_AVX512 void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1) {
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

VIT_AVX512 void gelu_backward_avx512(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = i + 16 <= i1 ? __mmask16(0xFFFF) : simd::tail_mask(i1 - i);
    const __m512 g = gelu_grad512(_mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(dx + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), g));
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
template <int NV>
VIT_AVX512 void mul_colsum_narrow(float* dx, float* db, const float* dy, const float* grad, int64_t M,
                                  int64_t N, int64_t j0, int64_t j1) {
  colsum_narrow_by_rows<NV>(db, M, j0, j1, [&](int64_t r, int64_t c, __mmask16 m) VIT_AVX512 {
    const int64_t i = r * N + c;
    const __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), _mm512_maskz_loadu_ps(m, grad + i));
    _mm512_mask_storeu_ps(dx + i, m, d);
    return d;
  });
}

// Splits [0, n) into per-thread chunks of whole vectors.
template <typename F>
void chunked(int64_t n, F&& f) {
  const int nt = threads_for(n * 16);  // ~16 flop-equivalents per element
  const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
  on_threads(nt, [&](int t) {
    const int64_t i0 = t * per, i1 = i0 + per < n ? i0 + per : n;
    if (i0 < i1) f(i0, i1);
  });
}
}  // namespace

void gelu_forward_reference(float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * kInvSqrt2));
}

void gelu_backward_reference(float* dx, const float* dy, const float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

void gelu_forward(float* y, const float* x, int64_t n) {
  if (isa() != Isa::avx512) return gelu_forward_reference(y, x, n);
  chunked(n, [&](int64_t i0, int64_t i1) { gelu_forward_avx512(y, x, i0, i1); });
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  if (isa() != Isa::avx512) return gelu_backward_reference(dx, dy, x, n);
  chunked(n, [&](int64_t i0, int64_t i1) { gelu_backward_avx512(dx, dy, x, i0, i1); });
}

void bias_gelu_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad) {
  if (isa() != Isa::avx512) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; ++r)
      for (int64_t j = 0; j < N; ++j) {
        const float v = h[r * N + j] + bias[j];
        const float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
        y[r * N + j] = v * cdf;  // 0.5 v (1 + erf) with one erf: halving is exact
        if (keep_grad) h[r * N + j] = cdf + v * (kInvSqrt2Pi * std::exp(-0.5f * v * v));
      }
    return;
  }
  const int nt = threads_for(M * N * 16);
  on_threads(nt, [&](int t) {
    const int64_t r0 = M * t / nt, r1 = M * (t + 1) / nt;
    if (keep_grad)
      bias_gelu_rows<true>(y, h, bias, N, r0, r1);
    else
      bias_gelu_rows<false>(y, h, bias, N, r0, r1);
  });
}

void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad) {
  if (isa() != Isa::avx512) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M * N; ++i) {
      dx[i] = dy[i] * grad[i];
      if (clear_grad) grad[i] = 0.f;
    }
    return colsum_add(db, dx, M, N);
  }
  if (clear_grad && N > kColsumNarrowN)
    return by_column_blocks(
        N, M * N, [&](int64_t j0, int64_t j1) { mul_colsum_columns<true>(dx, db, dy, grad, M, N, j0, j1); });
  // colsum_add's blocks of columns and order of rows (narrow matrices in row phases).
  by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) {
    if (N > kColsumNarrowN) return mul_colsum_columns<false>(dx, db, dy, grad, M, N, j0, j1);
    switch ((j1 - j0 + 15) / 16) {
      case 0: return;
      case 1: return mul_colsum_narrow<1>(dx, db, dy, grad, M, N, j0, j1);
      case 2: return mul_colsum_narrow<2>(dx, db, dy, grad, M, N, j0, j1);
      case 3: return mul_colsum_narrow<3>(dx, db, dy, grad, M, N, j0, j1);
      default: return mul_colsum_narrow<4>(dx, db, dy, grad, M, N, j0, j1);
    }
  });
  if (clear_grad) std::fill(grad, grad + M * N, 0.f);  // narrow rows: a second pass
}

}  // namespace vit::cpu
