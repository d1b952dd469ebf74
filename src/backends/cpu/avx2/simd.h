// AVX2 + FMA building blocks for the element-wise kernels (GELU, softmax, LayerNorm), 8
// lanes; the same formulas as avx512/simd.h, so the two paths agree to within their stated
// bounds. Compiled with function target attributes (VIT_AVX2; see avx512/simd.h for why not
// per-file flags) and chosen at run time (isa.h). AVX2 has no mask registers: a tail of n < 8
// lanes is read with vmaskmov through an integer mask (tail_mask), which neither reads nor
// faults past the n valid floats, and written in 4-, 2- and 1-float SSE pieces (store): AMD
// cores run vmaskmov's store form slowly, whatever the mask (about 25 cycles each on a Zen 4;
// docs/design.md, "Instruction sets").
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/gelu.h"  // kInvSqrt2

#define VIT_AVX2 __attribute__((target("avx2,fma")))

namespace vit::cpu::avx2 {

// Lane i is all ones for i < n (n clamped to [0, 8]), else zero.
VIT_AVX2 inline __m256i tail_mask(int64_t n) {
  const int32_t k = int32_t(n < 0 ? 0 : n > 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// The first n floats at p (n >= 8: a full load); lanes past n are 0.
VIT_AVX2 inline __m256 load(const float* p, int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(n));
}
// v's first n lanes to p (n >= 8: a full store).
VIT_AVX2 inline void store(float* p, int64_t n, __m256 v) {
  if (n >= 8) return _mm256_storeu_ps(p, v);
  __m128 x = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(p, x);
    x = _mm256_extractf128_ps(v, 1);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), x);
    x = _mm_movehl_ps(x, x);
    p += 2;
    n -= 2;
  }
  if (n >= 1) _mm_store_ss(p, x);
}
// dst[0, n) = src[0, n) in (masked) vector moves: for the short rows of the tiny models (16 to
// 64 bytes), where a memcpy call costs more than the copy.
VIT_AVX2 inline void copy_short(float* dst, const float* src, int64_t n) {
  for (int64_t j = 0; j < n; j += 8) store(dst + j, n - j, load(src + j, n - j));
}

// r[i] holds row i of an 8 x 8 block -> r[j] holds column j (its own inverse): unpacks within
// 128-bit lanes, 64-bit shuffles, then the lanes swapped across (24 shuffles).
VIT_AVX2 inline void transpose8x8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Sum and max over the 8 lanes in a fixed order (halves, then pairs), so results do not
// vary between calls.
VIT_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
VIT_AVX2 inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) lane-wise for x <= 0 (a softmax's x - max, erf's -x^2): avx512/simd.h's method
// (2^t, t = x log2(e) = n + f with n = round(t), the rounding of t put back into f by two
// FMAs, 2^f by the same degree-6 polynomial) with 2^n built in the exponent field instead of
// vscalef; n >= -126 there, so 2^n is a normal float and p 2^n rounds once. Within 1e-7
// relative of exp in double on [-87.3, 0] (tests/ops/test_simd.cpp); below -87.3365
// (including -inf) gives 0; NaN gives NaN.
VIT_AVX2 inline __m256 exp_nonpos(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365f);
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f), log2e_lo = _mm256_set1_ps(1.925963e-8f);
  const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_NLT_UQ);  // x >= lo, or NaN
  x = _mm256_max_ps(lo, x);                               // NaN stays NaN (maxps returns the second)
  const __m256 t = _mm256_mul_ps(x, log2e);
  const __m256 t_err = _mm256_fmadd_ps(x, log2e_lo, _mm256_fmsub_ps(x, log2e, t));
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_add_ps(_mm256_sub_ps(t, n), t_err);
  __m256 p = _mm256_set1_ps(1.534582261e-04f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339993207e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618489072e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550328642e-02f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264625e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471825e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// erf(x) lane-wise (Abramowitz & Stegun 7.1.26, as avx512/simd.h); *exp_neg_x2 receives
// exp(-x^2), which GELU's backward reuses.
VIT_AVX2 inline __m256 erf(__m256 x, __m256* exp_neg_x2) {
  const __m256 sign_bit = _mm256_set1_ps(-0.f);
  const __m256 a = _mm256_andnot_ps(sign_bit, x);
  const __m256 t =
      _mm256_div_ps(_mm256_set1_ps(1.f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  const __m256 e = exp_nonpos(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a));
  *exp_neg_x2 = e;
  const __m256 y = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.f));
  return _mm256_or_ps(y, _mm256_and_ps(x, sign_bit));
}

// Exact GELU, v Phi(v) = 0.5 v (1 + erf(v / sqrt 2)), lane-wise from erf(v / sqrt 2); gelu(v)
// from v alone (the packed linear's fused epilogue: the same bits as gelu.cpp's pass).
VIT_AVX2 inline __m256 gelu_from(__m256 v, __m256 erf) {
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.f), erf));
}
VIT_AVX2 inline __m256 gelu(__m256 v) {
  __m256 e;
  return gelu_from(v, erf(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2)), &e));
}

}  // namespace vit::cpu::avx2
