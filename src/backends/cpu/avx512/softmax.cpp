// Attention's row softmax and its backward in AVX-512 (softmax.h), and warm_rows.
#include <limits>

#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/softmax.h"

namespace vit::cpu::avx512 {

namespace {
// R rows in place (stride ld): max, exp and sum in vectors, then the scale. Masked keys are
// set to -inf first (exp512_nonpos gives exactly 0 for them); a row with every key masked
// becomes 0. The R rows' passes are interleaved: one row alone waits on its max and sum
// chains (4 cycles an add; docs/design.md, "Matrix products: oneDNN on x86-64, OpenBLAS on
// aarch64"); each row's arithmetic, and so its result, is the same as alone.
template <int R>
VIT_AVX512 void softmax_rows_avx512(float* P, int64_t ld, int64_t n, const uint8_t* km) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  if (km)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < n; ++j)
        if (!km[j]) P[r * ld + j] = -std::numeric_limits<float>::infinity();
  __m512 mx[R], sum[R], vmax[R];
  bool dead[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) mx[r] = ninf, sum[r] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : simd::tail_mask(n - j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) mx[r] = _mm512_max_ps(mx[r], _mm512_mask_loadu_ps(ninf, m, P + r * ld + j));
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float rmax = simd::hmax(mx[r]);
    dead[r] = rmax == -std::numeric_limits<float>::infinity();
    vmax[r] = _mm512_set1_ps(dead[r] ? 0.f : rmax);  // a dead row's exps are all 0
  }
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : simd::tail_mask(n - j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* row = P + r * ld;
      const __m512 e = simd::exp512_nonpos(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, m, row + j), vmax[r]));
      _mm512_mask_storeu_ps(row + j, m, e);
      sum[r] = _mm512_add_ps(sum[r], e);
    }
  }
  __m512 inv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) inv[r] = _mm512_set1_ps(dead[r] ? 0.f : 1.f / simd::hsum(sum[r]));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : simd::tail_mask(n - j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      _mm512_mask_storeu_ps(P + r * ld + j, m,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(m, P + r * ld + j), inv[r]));
  }
}

// Softmax backward of R rows in place (stride ld): d = p * (d - sum_j p d), the rows'
// passes interleaved as in softmax_rows_avx512.
template <int R>
VIT_AVX512 void softmax_backward_rows_avx512(float* d, const float* p, int64_t ld, int64_t n) {
  __m512 dot[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : simd::tail_mask(n - j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      dot[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + r * ld + j),
                               _mm512_maskz_loadu_ps(m, d + r * ld + j), dot[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) dot[r] = _mm512_set1_ps(simd::hsum(dot[r]));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = j + 16 <= n ? __mmask16(0xFFFF) : simd::tail_mask(n - j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pv = _mm512_maskz_loadu_ps(m, p + r * ld + j);
      _mm512_mask_storeu_ps(
          d + r * ld + j, m,
          _mm512_mul_ps(pv, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, d + r * ld + j), dot[r])));
    }
  }
}
}  // namespace

VIT_AVX512 void warm_rows(const float* p, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i + 16 <= n; i += 16) acc = _mm512_max_ps(acc, _mm512_loadu_ps(p + i));
  volatile float sink = _mm512_reduce_max_ps(acc);  // keeps the loads
  (void)sink;
}

void softmax_rows(float* P, int64_t rows, int64_t n, const uint8_t* km) {
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) softmax_rows_avx512<8>(P + i * n, n, n, km);
  for (; i + 4 <= rows; i += 4) softmax_rows_avx512<4>(P + i * n, n, n, km);
  for (; i < rows; ++i) softmax_rows_avx512<1>(P + i * n, n, n, km);
}

void softmax_backward_rows(float* dP, const float* P, int64_t rows, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) softmax_backward_rows_avx512<8>(dP + i * n, P + i * n, n, n);
  for (; i + 4 <= rows; i += 4) softmax_backward_rows_avx512<4>(dP + i * n, P + i * n, n, n);
  for (; i < rows; ++i) softmax_backward_rows_avx512<1>(dP + i * n, P + i * n, n, n);
}

VIT_AVX512 void exp_nonpos(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = simd::lanes(n - i);
    _mm512_mask_storeu_ps(y + i, m, simd::exp512_nonpos(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace vit::cpu::avx512
