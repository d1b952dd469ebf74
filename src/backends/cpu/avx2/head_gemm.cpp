// Attention's per-head products in AVX2 + FMA register blocks (avx2/kernels.h), no library
// call: a oneDNN call per (T x T x D) product costs more than the arithmetic at the small
// models' shapes. The AVX-512 kernels' design (avx512/head_gemm.cpp) in 8 lanes and 16
// registers: R rows x NV vectors of accumulators (at most 12), A read through strides (so
// P^T dO and dS^T q need no transposed copy), B's vectors whole from L1. (head_scores on this
// path is this product and then the row softmax, row by row: head_gemm.cpp; fused, only one
// row of scores fits the 16 registers and its chains have nothing to overlap with:
// docs/design.md, "Instruction sets".)
#include <algorithm>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"

namespace vit::cpu::avx2 {

namespace {
// One k of the block: c[r][v] += A(r, k) B(k, v), B's NV vectors loaded first and one
// broadcast of A live at a time: R NV + NV + 1 <= 16 registers. (Broadcasting all R of A's
// values first, as the compiler does when the loops run v outside r, needs R more and spills
// the 4 x 3 block's accumulators to the stack every k: docs/design.md, "Instruction sets".)
// Per accumulator the same fma chain over k either way, so the same bits.
template <int R, int NV>
VIT_AVX2 inline void fma_rows(__m256 (&c)[R][NV], const __m256 (&bv)[NV], const float* const (&a)[R],
                              int64_t ka) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 ar = _mm256_broadcast_ss(a[r] + ka);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[r][v] = _mm256_fmadd_ps(ar, bv[v], c[r][v]);
  }
}

// C[rows <= R, NV vectors from the block's column 0, n valid columns] = alpha A B + beta C +
// bias. Rows past `rows` read row 0 and are not stored.
template <int R, int NV>
VIT_AVX2 void gemm_block(int rows, int64_t n, int64_t K, float alpha, const float* A, int64_t ars,
                         int64_t aks, const float* B, int64_t ldb, float beta, const float* bias, float* C,
                         int64_t ldc) {
  __m256 c[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[r][v] = _mm256_setzero_ps();
  const float* a[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) a[r] = A + (r < rows ? r : 0) * ars;
  if (n >= 8 * NV) {  // whole vectors of B
    for (int64_t k = 0; k < K; ++k) {
      __m256 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(B + k * ldb + 8 * v);
      fma_rows<R, NV>(c, bv, a, k * aks);
    }
  } else {
    for (int64_t k = 0; k < K; ++k) {
      __m256 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = load(B + k * ldb + 8 * v, n - 8 * v);
      fma_rows<R, NV>(c, bv, a, k * aks);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const int64_t m = n - 8 * v;
    const __m256 vbias = bias ? load(bias + 8 * v, m) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (r >= rows) continue;  // (not break: a loop that leaves early is not unrolled)
      float* out = C + r * ldc + 8 * v;
      __m256 y = _mm256_fmadd_ps(c[r][v], va, vbias);
      if (beta != 0.f) y = _mm256_fmadd_ps(vb, load(out, m), y);
      store(out, m, y);
    }
  }
}

template <int R, int NV>
void gemm_row_blocks(int64_t M, int64_t n, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                     const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i += R)
    gemm_block<R, NV>(int(M - i < R ? M - i : R), n, K, alpha, A + i * ars, ars, aks, B, ldb, beta, bias,
                      C + i * ldc, ldc);
}

// All rows for columns [0, n), n <= 8 NV, in blocks of R rows (Short: 4, for products of at
// most 4 rows, such as a narrow head's C^T, which a block of 8 would half waste). Two
// vectors go 4 rows a block where that computes fewer padding rows than 6: a weight
// gradient's 8 rows over thousands of k (mnist-seed's fc1, fc2, patch embedding) as 4 + 4,
// not 6 + 6 of which 4 are padding.
template <int NV, bool Short>
void gemm_columns(int64_t M, int64_t n, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                  const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  constexpr int R = Short ? 4 : NV == 1 ? 8 : NV == 2 ? 6 : 4;
  if (NV == 2 && !Short && (M + 3) / 4 * 4 < (M + 5) / 6 * 6)
    return gemm_row_blocks<4, NV>(M, n, K, alpha, A, ars, aks, B, ldb, beta, bias, C, ldc);
  gemm_row_blocks<R, NV>(M, n, K, alpha, A, ars, aks, B, ldb, beta, bias, C, ldc);
}

template <bool Short>
void gemm_chunk(int nv, int64_t M, int64_t n, int64_t K, float alpha, const float* A, int64_t ars,
                int64_t aks, const float* B, int64_t ldb, float beta, const float* bias, float* C,
                int64_t ldc) {
  switch (nv) {
    case 1: return gemm_columns<1, Short>(M, n, K, alpha, A, ars, aks, B, ldb, beta, bias, C, ldc);
    case 2: return gemm_columns<2, Short>(M, n, K, alpha, A, ars, aks, B, ldb, beta, bias, C, ldc);
    default: return gemm_columns<3, Short>(M, n, K, alpha, A, ars, aks, B, ldb, beta, bias, C, ldc);
  }
}
}  // namespace

void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  // Columns in chunks of 3 vectors, but 4 left go as 2 + 2 (T = 50 keys: 3, 2, 2 vectors, the
  // partial one last, rather than 3, 3 and a chunk for 2 columns).
  for (int64_t n0 = 0; n0 < N;) {
    const int64_t left = (N - n0 + 7) / 8;
    const int nv = left >= 3 && left != 4 ? 3 : left >= 2 ? 2 : 1;
    const int64_t n = std::min<int64_t>(8 * nv, N - n0);
    const float* bs = bias ? bias + n0 : nullptr;
    if (M <= 4)
      gemm_chunk<true>(nv, M, n, K, alpha, A, ars, aks, B + n0, ldb, beta, bs, C + n0, ldc);
    else
      gemm_chunk<false>(nv, M, n, K, alpha, A, ars, aks, B + n0, ldb, beta, bs, C + n0, ldc);
    n0 += n;
  }
}

namespace {
// dst[j][i] = src[i][j] for an 8 x 8 tile in registers (simd.h: 24 shuffles and 16 moves where
// four 4 x 4 tiles take 32 and 32).
VIT_AVX2 inline void transpose_tile8(float* dst, int64_t ldd, const float* src, int64_t lds) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  transpose8x8(r);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + j * ldd, r[j]);
}

VIT_AVX2 inline void transpose_tile4(float* dst, int64_t ldd, const float* src, int64_t lds) {
  __m128 a = _mm_loadu_ps(src), b = _mm_loadu_ps(src + lds);
  __m128 c = _mm_loadu_ps(src + 2 * lds), d = _mm_loadu_ps(src + 3 * lds);
  _MM_TRANSPOSE4_PS(a, b, c, d);
  _mm_storeu_ps(dst, a), _mm_storeu_ps(dst + ldd, b);
  _mm_storeu_ps(dst + 2 * ldd, c), _mm_storeu_ps(dst + 3 * ldd, d);
}
}  // namespace

// 8 x 8 tiles in AVX registers where both sides are at least 16, then 4 x 4 tiles in SSE
// registers (_MM_TRANSPOSE4_PS) along the edges: a narrow head's k or output (4 columns or 4
// rows, mnist-seed's D = 4) is all 4 x 4 tiles but for the rows past a multiple of 4, which the
// plain loop takes, as it does the columns past one. The 8 x 8 tiles win on large blocks
// (packing ViT-B/16's weights, cifar-seed's keys) but not alone, where their lane-crossing
// permutes' latency is not hidden, nor on mnist-seed's lanes, hence the 16 (docs/design.md,
// "Matrix products: oneDNN on x86-64, OpenBLAS on aarch64").
VIT_AVX2 void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows,
                             int64_t cols) {
  const bool wide = rows >= 16 && cols >= 16;
  const int64_t r8 = wide ? rows / 8 * 8 : 0, c8 = wide ? cols / 8 * 8 : 0;
  const int64_t r4 = rows / 4 * 4, c4 = cols / 4 * 4;
  for (int64_t i = 0; i < r8; i += 8)
    for (int64_t j = 0; j < c8; j += 8) transpose_tile8(dst + j * ldd + i, ldd, src + i * lds + j, lds);
  for (int64_t i = 0; i < r4; i += 4)  // the 4 x 4 tiles right of the 8 x 8 ones and below them
    for (int64_t j = i < r8 ? c8 : 0; j < c4; j += 4)
      transpose_tile4(dst + j * ldd + i, ldd, src + i * lds + j, lds);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = i < r4 ? c4 : 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

}  // namespace vit::cpu::avx2
