// Small matrix products for attention's per-head work (T x T x D with D = 4 ... 64), where a
// library call costs more than the arithmetic: AVX-512 register blocks of 4 rows x 32
// columns, plus a transpose so the NT and TN products become NN. The reference is gemm()
// (oneDNN); tests/ops/test_simd.cpp compares them.
#include "backends/cpu/cpu.h"
#include "backends/cpu/simd.h"

namespace vit::cpu {

namespace {
// Rows r0..r3 of C (rows past `rows` read row 0 and are not stored), columns [n0, n0 + 16 NV)
// with masks m0, m1 on the two vectors. Accumulators are named variables, not an array: GCC
// keeps an array of vectors in memory and stores it every iteration.
template <int NV>
VIT_AVX512 void block4(int rows, int64_t n0, __mmask16 m0, __mmask16 m1, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  const float* a0 = A;
  const float* a1 = rows > 1 ? A + lda : A;
  const float* a2 = rows > 2 ? A + 2 * lda : A;
  const float* a3 = rows > 3 ? A + 3 * lda : A;
  __m512 c00 = _mm512_setzero_ps(), c10 = c00, c20 = c00, c30 = c00;
  __m512 c01 = c00, c11 = c00, c21 = c00, c31 = c00;
  const float* b = B + n0;
  for (int64_t k = 0; k < K; ++k, b += ldb) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b);
    const __m512 x0 = _mm512_set1_ps(a0[k]), x1 = _mm512_set1_ps(a1[k]);
    const __m512 x2 = _mm512_set1_ps(a2[k]), x3 = _mm512_set1_ps(a3[k]);
    c00 = _mm512_fmadd_ps(x0, b0, c00);
    c10 = _mm512_fmadd_ps(x1, b0, c10);
    c20 = _mm512_fmadd_ps(x2, b0, c20);
    c30 = _mm512_fmadd_ps(x3, b0, c30);
    if constexpr (NV == 2) {
      const __m512 b1 = _mm512_maskz_loadu_ps(m1, b + 16);
      c01 = _mm512_fmadd_ps(x0, b1, c01);
      c11 = _mm512_fmadd_ps(x1, b1, c11);
      c21 = _mm512_fmadd_ps(x2, b1, c21);
      c31 = _mm512_fmadd_ps(x3, b1, c31);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  float* c = C + n0;
  const __m512 out0[4] = {c00, c10, c20, c30}, out1[4] = {c01, c11, c21, c31};
  for (int r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, _mm512_mul_ps(out0[r], va));
    if constexpr (NV == 2) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, _mm512_mul_ps(out1[r], va));
  }
}

VIT_AVX512 __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n > 0 ? simd::tail_mask(n) : __mmask16(0);
}
}  // namespace

void head_gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i += 4) {
    const int rows = M - i < 4 ? int(M - i) : 4;
    for (int64_t n0 = 0; n0 < N; n0 += 32) {
      const int64_t left = N - n0;
      if (left > 16)
        block4<2>(rows, n0, lanes(left), lanes(left - 16), K, alpha, A + i * lda, lda, B, ldb, C + i * ldc,
                  ldc);
      else
        block4<1>(rows, n0, lanes(left), 0, K, alpha, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
    }
  }
}

void transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

}  // namespace vit::cpu
