// AVX-512 building blocks for the element-wise kernels (GELU, softmax, LayerNorm), compiled
// for AVX-512 with function target attributes (not per-file -m flags: inline functions and
// templates from shared headers instantiated there could otherwise be merged into the rest
// of the program with AVX-512 instructions) and chosen at run time (isa.h), so the library
// still runs on any x86-64. Each fast kernel has a plain reference next to it in the kernel's
// file; tests/ops/test_simd.cpp checks they match within stated tolerances.
//
// Accuracy: exp512_nonpos (x <= 0) is within 8.5e-8 relative (about 1 ulp);
// erf512 is Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7, i.e. ~2.5 ulp near 1).
#pragma once
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the pass-through of unmasked
// operations, which -Wmaybe-uninitialized flags wherever they inline (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "backends/cpu/gelu.h"  // kInvSqrt2

#define VIT_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))
// For the fully unrolled register-block kernels (attention_narrow.cpp, skinny_gemm.cpp):
// AddressSanitizer's instrumentation of their unrolled loads, stores and spilled register
// arrays took minutes to compile (GCC 12 with -fsanitize=address: 169 s for
// attention_narrow.cpp, 8.7-18 s without it on these functions; clang's fuzz build over
// 7 minutes). UBSan still checks them, and the tests compare them with plain loops
// (bit for bit, or against doubles) at their block edges and tails.
// In clang (the fuzz build) UBSan's and the fuzzer's coverage instrumentation of them cost
// as much, and the fuzzers do not aim at them: off there too.
#if defined(__clang__)
#define VIT_NO_ASAN __attribute__((no_sanitize("address", "undefined", "coverage")))
#else
#define VIT_NO_ASAN __attribute__((no_sanitize("address")))
#endif

namespace vit::cpu::avx512::simd {

// Mask of the first n (< 16) lanes.
VIT_AVX512 inline __mmask16 tail_mask(int64_t n) {
  return __mmask16((1u << n) - 1u);
}

// Mask of the lanes of a vector that starts n floats before the end: all 16, the first n, or
// none (n <= 0).
VIT_AVX512 inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n > 0 ? tail_mask(n) : __mmask16(0);
}

// dst[0, n) = src[0, n) in masked vector moves: for the short rows of the tiny models (16 to
// 128 bytes), where a memcpy call costs more than the copy.
VIT_AVX512 inline void copy_short(float* dst, const float* src, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xFFFF) : tail_mask(n - j);
    _mm512_mask_storeu_ps(dst + j, m, _mm512_maskz_loadu_ps(m, src + j));
  }
}

// r[0..16) = rows of a 16 x 16 block (row i holds elements (i, 0..15)) -> r[j] holds column j,
// in registers: 4 rounds of interleaves (32-bit, 64-bit, 128-bit lanes, 256-bit halves).
VIT_AVX512 inline void transpose16x16(__m512 (&r)[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 16; i += 8)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xDD);
    }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
}
// r[i] = the first `cols` floats of src + i lds for i < rows, zero elsewhere.
VIT_AVX512 inline void load_rows16(__m512 (&r)[16], const float* src, int64_t lds, int64_t rows,
                                   int64_t cols) {
  const __mmask16 m = lanes(cols);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_ps(m, src + i * lds) : _mm512_setzero_ps();
}
// The first `cols` lanes of r[i] to dst + i ldd for i < rows.
VIT_AVX512 inline void store_rows16(float* dst, int64_t ldd, const __m512 (&r)[16], int64_t rows,
                                    int64_t cols) {
  const __mmask16 m = lanes(cols);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    if (i < rows) _mm512_mask_storeu_ps(dst + i * ldd, m, r[i]);
}

// Sum and max over the 16 lanes by swapping halves (GCC 12's _mm512_reduce_* trip
// -Wmaybe-uninitialized); a fixed order, so results do not vary between calls.
VIT_AVX512 inline __m512 combine(__m512 a, __m512 b, bool max) {
  return max ? _mm512_max_ps(a, b) : _mm512_add_ps(a, b);
}
VIT_AVX512 inline float reduce(__m512 v, bool max) {
  v = combine(v, _mm512_shuffle_f32x4(v, v, 0x4E), max);
  v = combine(v, _mm512_shuffle_f32x4(v, v, 0xB1), max);
  v = combine(v, _mm512_permute_ps(v, 0x4E), max);
  v = combine(v, _mm512_permute_ps(v, 0xB1), max);
  return _mm512_cvtss_f32(v);
}
VIT_AVX512 inline float hsum(__m512 v) {
  return reduce(v, false);
}
VIT_AVX512 inline float hmax(__m512 v) {
  return reduce(v, true);
}

// exp(x) lane-wise for x <= 0, the only arguments the kernels have (a softmax's x - max,
// erf's -x^2): 2^t with t = x log2(e) = n + f, n = round(t), 2^f by a degree-6 polynomial on
// [-1/2, 1/2] (relative error < 1e-7 in float), scaled by 2^n (vscalef); the rounding of t
// (the float product and log2(e)'s float value, ~1e-7 |x| relative) is put back into f by
// two FMAs. Within 8.5e-8 relative (tests/ops/test_simd.cpp) in 15 instructions; Cephes'
// expf, used before, took 19 for ~2 ulp, which counts where the exp is most of the work
// (attention_lanes.cpp). Inputs below -87.3 (including -inf) give 0, NaN gives NaN.
VIT_AVX512 inline __m512 exp512_nonpos(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3365f);
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f), log2e_lo = _mm512_set1_ps(1.925963e-8f);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);  // x >= lo, or NaN
  x = _mm512_max_ps(lo, x);                                       // NaN stays NaN
  const __m512 t = _mm512_mul_ps(x, log2e);
  const __m512 t_err = _mm512_fmadd_ps(x, log2e_lo, _mm512_fmsub_ps(x, log2e, t));      // x log2(e) - t
  const __m512 r = _mm512_reduce_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // t - round(t)
  const __m512 n = _mm512_sub_ps(t, r);                                                 // round(t), exactly
  const __m512 f = _mm512_add_ps(r, t_err);
  __m512 p = _mm512_set1_ps(1.534582261e-04f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339993207e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618489072e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550328642e-02f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264625e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471825e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_maskz_scalef_ps(keep, p, n);
}

// erf(x) lane-wise; *exp_neg_x2 receives exp(-x^2), which GELU's backward reuses.
VIT_AVX512 inline __m512 erf512(__m512 x, __m512* exp_neg_x2) {
  const __m512 sign_bit = _mm512_set1_ps(-0.f);
  const __m512 a = _mm512_andnot_ps(sign_bit, x);  // |x|
  const __m512 t =
      _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.f)));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 e = exp512_nonpos(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a));
  *exp_neg_x2 = e;
  const __m512 y = _mm512_fnmadd_ps(p, e, _mm512_set1_ps(1.f));  // erf(|x|)
  return _mm512_or_ps(y, _mm512_and_ps(x, sign_bit));            // sign of x
}

// Exact GELU, v Phi(v) = 0.5 v (1 + erf(v / sqrt 2)), lane-wise from erf(v / sqrt 2).
VIT_AVX512 inline __m512 gelu_from(__m512 v, __m512 erf) {
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.f), erf));
}

VIT_AVX512 inline __m512 gelu512(__m512 v) {
  __m512 e;
  return gelu_from(v, erf512(_mm512_mul_ps(v, _mm512_set1_ps(kInvSqrt2)), &e));
}

// The lanes m of v rounded to bf16 (nearest even; NaN stays a quiet NaN, subnormals are kept)
// and stored at dst: the scalar to_bf16's bits (linear_bf16.cpp), in integer lanes, since
// AVX512-BF16's vcvtneps2bf16 treats subnormal inputs as zero.
VIT_AVX512 inline void store_bf16(uint16_t* dst, __mmask16 m, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i even =
      _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, even), 16);
  const __m512i r = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  _mm256_mask_storeu_epi16(dst, m, _mm512_cvtepi32_epi16(r));
}

}  // namespace vit::cpu::avx512::simd
