// Products with few output columns and a short sum (N <= 32, K = 8, 16, 24 or 32; A
// row-major): mnist-seed's linear layers and their input gradients, e.g. qkv [M, 8] x [8, 24]
// and fc2's dx [M, 8] x [8, 32] over thousands of rows. avx512/skinny_gemm.cpp's kernel in
// AVX2's 16 registers: K is a compile-time constant (the k loop unrolls, A's elements at
// fixed offsets), the row loop sits inside the kernel (head_gemm pays a call, a runtime k
// loop and its setup per block of rows), R rows x NV vectors of accumulators (at most 12),
// B's vectors read from L1. Each output is the same fma chain over k from 0 and the same
// epilogue as avx2/head_gemm.cpp's, so the bits are the same.
// Declared in kernels.h; gemm.cpp calls it where isa() is avx2.
#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/kernel_table.h"

namespace vit::cpu::avx2 {

namespace {
// B's vector v of the row at b: whole, or the last one masked to the columns that exist.
template <int NV>
VIT_AVX2 inline __m256 b_vector(const float* b, int v, __m256i tail) {
  return v + 1 < NV ? _mm256_loadu_ps(b + 8 * v) : _mm256_maskload_ps(b + 8 * v, tail);
}

// RR rows of C from A's rows at a (leading dim lda) into c (leading dim ldc); tail: the
// mask of the last vector's columns, `last` of them (stored by store(), not vmaskmov:
// simd.h). Per k, the fewer of B's NV vectors or A's RR broadcasts stay live: RR NV +
// min(RR, NV) + 1 <= 16 registers (3 x 4 with B's 4 vectors live needs 17 and spills).
// Either order runs each accumulator's fma chain over k the same way.
template <int K, int NV, int RR>
VIT_AVX2 inline void skinny_block(const float* a, int64_t lda, const float* B, int64_t ldb, __m256i tail,
                                  int64_t last, __m256 va, __m256 vb, const __m256 (&vbias)[NV], bool beta,
                                  float* c, int64_t ldc) {
  __m256 acc[RR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
#pragma GCC unroll 32
  for (int k = 0; k < K; ++k) {
    if constexpr (NV > RR) {  // 3 rows x 4 vectors: A's broadcasts live, one B vector at a time
      __m256 x[RR];
#pragma GCC unroll 16
      for (int r = 0; r < RR; ++r) x[r] = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const __m256 bk = b_vector<NV>(B + k * ldb, v, tail);
#pragma GCC unroll 16
        for (int r = 0; r < RR; ++r) acc[r][v] = _mm256_fmadd_ps(x[r], bk, acc[r][v]);
      }
    } else {  // B's vectors live, one broadcast at a time
      __m256 bk[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bk[v] = b_vector<NV>(B + k * ldb, v, tail);
#pragma GCC unroll 16
      for (int r = 0; r < RR; ++r) {
        const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(x, bk[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < RR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* out = c + r * ldc + 8 * v;
      __m256 y = _mm256_fmadd_ps(acc[r][v], va, vbias[v]);
      if (v + 1 < NV) {
        if (beta) y = _mm256_fmadd_ps(vb, _mm256_loadu_ps(out), y);
        _mm256_storeu_ps(out, y);
      } else {
        if (beta) y = _mm256_fmadd_ps(vb, _mm256_maskload_ps(out, tail), y);
        store(out, last, y);
      }
    }
}

template <int K, int NV>
VIT_AVX2 void skinny_rows(int64_t M, int64_t N, float alpha, const float* A, int64_t lda, const float* B,
                          int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  // Rows per block: as many accumulators as fit next to B's vectors and a broadcast.
  constexpr int R = NV == 1 ? 8 : NV == 2 ? 6 : NV == 3 ? 4 : 3;
  const int64_t last = N - 8 * (NV - 1);
  const __m256i tail = tail_mask(last);
  __m256 vbias[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v)
    vbias[v] = !bias        ? _mm256_setzero_ps()
               : v + 1 < NV ? _mm256_loadu_ps(bias + 8 * v)
                            : _mm256_maskload_ps(bias + 8 * v, tail);
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const bool has_beta = beta != 0.f;
  int64_t i = 0;
  for (; i + R <= M; i += R)
    skinny_block<K, NV, R>(A + i * lda, lda, B, ldb, tail, last, va, vb, vbias, has_beta, C + i * ldc, ldc);
  for (; i < M; ++i)
    skinny_block<K, NV, 1>(A + i * lda, lda, B, ldb, tail, last, va, vb, vbias, has_beta, C + i * ldc, ldc);
}

}  // namespace

bool skinny_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  if (N > 32 || N < 1) return false;
  // K and the count of 8-float column vectors (1 to 4) as template arguments.
  return with_constant<8, 16, 24, 32>(K, [&]<int KK>() {
    with_constant<1, 2, 3, 4>(
        (N + 7) / 8, [&]<int NV>() { skinny_rows<KK, NV>(M, N, alpha, A, lda, B, ldb, beta, bias, C, ldc); });
  });
}

}  // namespace vit::cpu::avx2
