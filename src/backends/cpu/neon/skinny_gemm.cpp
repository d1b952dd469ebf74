// Products with few output columns and a short sum (N <= 32, K = 8, 16, 24 or 32; A
// row-major): mnist-seed's linear layers and their input gradients, e.g. qkv [M, 8] x [8, 24]
// and fc2's dx [M, 8] x [8, 32] over thousands of rows. avx2/skinny_gemm.cpp's kernel in
// NEON's 4 lanes and 32 registers: K is a compile-time constant (the k loop unrolls, A's
// elements at fixed offsets), the row loop sits inside the kernel (head_gemm pays a call, a
// runtime k loop and its setup per block of rows), R rows x NV vectors of accumulators (up
// to 8 vectors of 4 columns) next to B's NV vectors of row k, read from L1. Each output is
// the same fma chain over k from 0 and the same epilogue as neon/head_gemm.cpp's, so the
// bits are the same.
// Declared in narrow.h; gemm.cpp calls it where isa() is neon.
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// RR rows of C from A's rows at a (leading dim lda) into c (leading dim ldc); tail: the
// valid columns of the last vector (1 to 4).
template <int K, int NV, int RR>
inline void skinny_block(const float* a, int64_t lda, const float* B, int64_t ldb, int64_t tail, float alpha,
                         float beta, const float32x4_t (&vbias)[NV], float* c, int64_t ldc) {
  float32x4_t acc[RR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = vdupq_n_f32(0.f);
#pragma GCC unroll 32
  for (int k = 0; k < K; ++k) {
    float32x4_t bk[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      bk[v] = v + 1 < NV ? vld1q_f32(B + k * ldb + 4 * v) : load(B + k * ldb + 4 * v, tail);
#pragma GCC unroll 16
    for (int r = 0; r < RR; ++r) {
      const float x = a[r * lda + k];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = vfmaq_n_f32(acc[r][v], bk[v], x);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < RR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* out = c + r * ldc + 4 * v;
      const int64_t m = v + 1 < NV ? 4 : tail;
      float32x4_t y = vfmaq_n_f32(vbias[v], acc[r][v], alpha);
      if (beta != 0.f) y = vfmaq_n_f32(y, load(out, m), beta);
      store(out, m, y);
    }
}

template <int K, int NV>
void skinny_rows(int64_t M, int64_t N, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float beta, const float* bias, float* C, int64_t ldc) {
  // Rows per block: as many accumulators as fit next to B's vectors (32 registers).
  constexpr int R = NV <= 2 ? 8 : NV == 3 ? 6 : NV == 4 ? 5 : NV == 5 ? 4 : NV <= 7 ? 3 : 2;
  const int64_t tail = N - 4 * (NV - 1);
  float32x4_t vbias[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) vbias[v] = bias ? load(bias + 4 * v, v + 1 < NV ? 4 : tail) : vdupq_n_f32(0.f);
  int64_t i = 0;
  for (; i + R <= M; i += R)
    skinny_block<K, NV, R>(A + i * lda, lda, B, ldb, tail, alpha, beta, vbias, C + i * ldc, ldc);
  for (; i < M; ++i)
    skinny_block<K, NV, 1>(A + i * lda, lda, B, ldb, tail, alpha, beta, vbias, C + i * ldc, ldc);
}

}  // namespace

bool skinny_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  if (N > 32 || N < 1) return false;
  // K and the count of 4-float column vectors (1 to 8) as template arguments.
  return with_constant<8, 16, 24, 32>(K, [&]<int KK>() {
    with_constant<1, 2, 3, 4, 5, 6, 7, 8>(
        (N + 3) / 4, [&]<int NV>() { skinny_rows<KK, NV>(M, N, alpha, A, lda, B, ldb, beta, bias, C, ldc); });
  });
}

}  // namespace vit::cpu::neon
