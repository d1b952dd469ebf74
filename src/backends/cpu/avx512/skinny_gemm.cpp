// Products with few output columns and a short sum (N <= 32, K = 8, 16, 24 or 32; A
// row-major): mnist-seed's linear layers and their input gradients, e.g. qkv [M, 8] x [8, 24]
// and fc2's dx [M, 8] x [8, 32] over thousands of rows. head_gemm's register blocks (one call
// per block of rows, a runtime k loop, B re-read for every block) left much of the FMA rate
// unused here (docs/history/benchmarks-2026-11.md, "Session of 2026-11-25 (later):
// mnist-seed's step"); here K is a compile-time constant, the row loop sits inside the
// kernel, and B (K x N floats) stays in registers when it fits in 16 of them. Each output is
// the same fma chain over k from 0 and the same epilogue as head_gemm's, so the bits are the
// same.
// Declared in kernels.h; gemm.cpp calls it where isa() is avx512.
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/kernel_table.h"

namespace vit::cpu::avx512 {

namespace {
template <int K, int NV>
struct Panel {
  static constexpr bool kInRegisters = K * NV <= 16;
  __m512 b[kInRegisters ? K : 1][NV];
};

// RR rows of C from row pointers a (A's rows) and c (C's rows).
template <int K, int NV, int RR>
VIT_NO_ASAN VIT_AVX512 inline void skinny_block(const float* a, int64_t lda, const Panel<K, NV>& p,
                                                const float* B, int64_t ldb, const __mmask16 (&m)[NV],
                                                __m512 va, __m512 vb, const __m512 (&vbias)[NV], bool beta,
                                                float* c, int64_t ldc) {
  __m512 acc[RR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  constexpr int Q = (RR + 2) / 3;
  const float* base[Q];
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) base[q] = a + 3 * q * lda;
#pragma GCC unroll 32
  for (int k = 0; k < K; ++k) {
    __m512 bk[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      if constexpr (Panel<K, NV>::kInRegisters)
        bk[v] = p.b[k][v];
      else
        bk[v] = _mm512_maskz_loadu_ps(m[v], B + k * ldb + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < RR; ++r) {
      // Row r at base[r / 3] + (r % 3) lda: x86's scaled index (lda x 4 or 8 bytes) with
      // one base per 3 rows, so that 12 rows need 4 pointers, not 12.
      const __m512 x = _mm512_set1_ps(base[r / 3][(r % 3) * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(x, bk[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < RR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* out = c + r * ldc + 16 * v;
      __m512 y = _mm512_fmadd_ps(acc[r][v], va, vbias[v]);
      if (beta) y = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m[v], out), y);
      _mm512_mask_storeu_ps(out, m[v], y);
    }
}

template <int K, int NV>
VIT_NO_ASAN VIT_AVX512 void skinny_rows(int64_t M, int64_t N, float alpha, const float* A, int64_t lda,
                                        const float* B, int64_t ldb, float beta, const float* bias, float* C,
                                        int64_t ldc) {
  // Rows per block: enough independent accumulators (>= 8) to cover the FMA latency,
  // within 32 registers next to B's panel when it is held there.
  constexpr int R = Panel<K, NV>::kInRegisters ? (NV == 1 ? 8 : 4) : (NV == 1 ? 16 : 8);
  __mmask16 m[NV];
  __m512 vbias[NV];
  Panel<K, NV> p;
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    m[v] = simd::lanes(N - 16 * v);
    vbias[v] = bias ? _mm512_maskz_loadu_ps(m[v], bias + 16 * v) : _mm512_setzero_ps();
  }
  if constexpr (Panel<K, NV>::kInRegisters)
#pragma GCC unroll 32
    for (int k = 0; k < K; ++k)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) p.b[k][v] = _mm512_maskz_loadu_ps(m[v], B + k * ldb + 16 * v);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const bool has_beta = beta != 0.f;
  int64_t i = 0;
  for (; i + R <= M; i += R)
    skinny_block<K, NV, R>(A + i * lda, lda, p, B, ldb, m, va, vb, vbias, has_beta, C + i * ldc, ldc);
  for (; i < M; ++i)
    skinny_block<K, NV, 1>(A + i * lda, lda, p, B, ldb, m, va, vb, vbias, has_beta, C + i * ldc, ldc);
}

template <int K>
bool skinny_k(int64_t M, int64_t N, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
              float beta, const float* bias, float* C, int64_t ldc) {
  if (N <= 16)
    skinny_rows<K, 1>(M, N, alpha, A, lda, B, ldb, beta, bias, C, ldc);
  else
    skinny_rows<K, 2>(M, N, alpha, A, lda, B, ldb, beta, bias, C, ldc);
  return true;
}
}  // namespace

bool skinny_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  if (N > 32) return false;
  return with_constant<8, 16, 24, 32>(
      K, [&]<int KK>() { skinny_k<KK>(M, N, alpha, A, lda, B, ldb, beta, bias, C, ldc); });
}

}  // namespace vit::cpu::avx512
