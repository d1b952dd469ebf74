// Attention's per-head products in NEON register blocks (neon/kernels.h): avx2/head_gemm.cpp's
// design in 4 lanes and 32 registers (up to 8 rows x 2 vectors or 6 rows x 4 vectors of
// accumulators), A read through strides, B's vectors whole from L1; and head_transpose in
// 4 x 4 tiles.
#include <algorithm>

#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// C[rows <= R, NV vectors, n valid columns] = alpha A B + beta C + bias; rows past `rows`
// read row 0 and are not stored.
template <int R, int NV>
void gemm_block(int rows, int64_t n, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  float32x4_t c[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = vdupq_n_f32(0.f);
  const float* a[R];
  for (int r = 0; r < R; ++r) a[r] = A + (r < rows ? r : 0) * ars;
  const bool full = n >= 4 * NV;
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    float32x4_t bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = full ? vld1q_f32(b + 4 * v) : load(b + 4 * v, n - 4 * v);
    for (int r = 0; r < R; ++r) {
      const float x = a[r][k * aks];
      for (int v = 0; v < NV; ++v) c[r][v] = vfmaq_n_f32(c[r][v], bv[v], x);
    }
  }
  for (int v = 0; v < NV; ++v) {
    const int64_t m = n - 4 * v;
    const float32x4_t vbias = bias ? load(bias + 4 * v, m) : vdupq_n_f32(0.f);
    for (int r = 0; r < rows && r < R; ++r) {
      float* out = C + r * ldc + 4 * v;
      float32x4_t y = vfmaq_n_f32(vbias, c[r][v], alpha);
      if (beta != 0.f) y = vfmaq_n_f32(y, load(out, m), beta);
      store(out, m, y);
    }
  }
}

template <int NV>
void gemm_columns(int64_t M, int64_t n, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                  const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  constexpr int R = NV <= 2 ? 8 : 6;
  for (int64_t i = 0; i < M; i += R)
    gemm_block<R, NV>(int(M - i < R ? M - i : R), n, K, alpha, A + i * ars, ars, aks, B, ldb, beta, bias,
                      C + i * ldc, ldc);
}
}  // namespace

void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  for (int64_t n0 = 0; n0 < N; n0 += 16) {  // columns in chunks of up to 4 vectors
    const int64_t n = std::min<int64_t>(16, N - n0);
    const float* bs = bias ? bias + n0 : nullptr;
    switch ((n + 3) / 4) {
      case 1: gemm_columns<1>(M, n, K, alpha, A, ars, aks, B + n0, ldb, beta, bs, C + n0, ldc); break;
      case 2: gemm_columns<2>(M, n, K, alpha, A, ars, aks, B + n0, ldb, beta, bs, C + n0, ldc); break;
      case 3: gemm_columns<3>(M, n, K, alpha, A, ars, aks, B + n0, ldb, beta, bs, C + n0, ldc); break;
      default: gemm_columns<4>(M, n, K, alpha, A, ars, aks, B + n0, ldb, beta, bs, C + n0, ldc); break;
    }
  }
}

// 4 x 4 tiles transposed in registers (pairs of trn1/trn2 on floats, then on their 64-bit
// halves): a narrow head's k or output (mnist-seed's D = 4) and attention_lanes.cpp's groups
// of 4 samples are whole tiles but for the rows past a multiple of 4, which the plain loop
// takes, as it does the columns past one.
void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols) {
  const int64_t r4 = rows / 4 * 4, c4 = cols / 4 * 4;
  for (int64_t i = 0; i < r4; i += 4)
    for (int64_t j = 0; j < c4; j += 4) {
      const float32x4_t a = vld1q_f32(src + i * lds + j), b = vld1q_f32(src + (i + 1) * lds + j);
      const float32x4_t c = vld1q_f32(src + (i + 2) * lds + j), d = vld1q_f32(src + (i + 3) * lds + j);
      // ab0 = a0 b0 a2 b2, ab1 = a1 b1 a3 b3, likewise cd0, cd1; column j is ab0's and cd0's low halves.
      const float64x2_t ab0 = vreinterpretq_f64_f32(vtrn1q_f32(a, b)),
                        ab1 = vreinterpretq_f64_f32(vtrn2q_f32(a, b));
      const float64x2_t cd0 = vreinterpretq_f64_f32(vtrn1q_f32(c, d)),
                        cd1 = vreinterpretq_f64_f32(vtrn2q_f32(c, d));
      vst1q_f32(dst + j * ldd + i, vreinterpretq_f32_f64(vtrn1q_f64(ab0, cd0)));
      vst1q_f32(dst + (j + 1) * ldd + i, vreinterpretq_f32_f64(vtrn1q_f64(ab1, cd1)));
      vst1q_f32(dst + (j + 2) * ldd + i, vreinterpretq_f32_f64(vtrn2q_f64(ab0, cd0)));
      vst1q_f32(dst + (j + 3) * ldd + i, vreinterpretq_f32_f64(vtrn2q_f64(ab1, cd1)));
    }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = i < r4 ? c4 : 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

}  // namespace vit::cpu::neon
