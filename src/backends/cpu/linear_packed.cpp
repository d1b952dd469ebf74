// Inference linear on weights packed in place: y = x w^T + b for few rows (batch-1 ViTs:
// 197 token rows). oneDNN's sgemm repacks w at every call and splits small products poorly
// over two threads (ViT-B/16's fc2 at batch 1: 124 GFLOP/s on 2 threads against 94 on one);
// here w is packed once, and the threads split the output columns, so each output is
// summed over k in order by one thread whatever the thread count.
//
// Layout: panel p holds rows [16p, 16p + w) of w[N,K] (w = 16, or the rows left at the end)
// transposed to [K, w], in the memory those rows occupied: packing is a transpose of each
// 16-row block and needs no second copy of the weights.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/simd.h"
#include "vit/core/threads.h"

namespace vit::cpu {

namespace {
constexpr int64_t kPanel = 16;           // output columns per panel (one AVX-512 vector)
constexpr int kRows = 8;                 // rows of x per register block: 8 x 32 outputs in 16 registers
constexpr int64_t kRowBlock = 256;       // rows per pass over the weights (x's block stays in L2)
constexpr int64_t kPreferredRows = 800;  // see packed_linear_preferred

inline int64_t panel_width(int64_t N, int64_t n0) {
  return N - n0 < kPanel ? N - n0 : kPanel;
}

// Rows i0 .. i0+rows of y, columns [n0, n0 + 32) from panels B0 (width w0) and B1 (width
// w1, 0 when there is no second panel). Rows past `rows` read row 0 and are not stored.
VIT_AVX512 void block(int rows, int64_t K, const float* A, int64_t lda, const float* B0, int64_t w0,
                      const float* B1, int64_t w1, const float* bias, float* C, int64_t ldc) {
  const __mmask16 m0 = w0 == 16 ? __mmask16(0xFFFF) : simd::tail_mask(w0);
  const __mmask16 m1 = w1 == 16 ? __mmask16(0xFFFF) : w1 > 0 ? simd::tail_mask(w1) : __mmask16(0);
  if (w1 == 0) B1 = B0, w1 = w0;  // a harmless second stream, masked off at the store
  __m512 c[kRows][2];
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  const float* a[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    c[r][0] = b0, c[r][1] = b1;
    a[r] = A + (r < rows ? r : 0) * lda;
  }
  for (int64_t k = 0; k < K; ++k) {
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, B0 + k * w0);
    const __m512 v1 = _mm512_maskz_loadu_ps(m1, B1 + k * w1);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r][k]);
      c[r][0] = _mm512_fmadd_ps(x, v0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(x, v1, c[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
    if (r < rows) {
      _mm512_mask_storeu_ps(C + r * ldc, m0, c[r][0]);
      _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c[r][1]);
    }
}

VIT_AVX512 void forward_avx512(float* y, const float* x, const float* wp, const float* b, int64_t M,
                               int64_t K, int64_t N) {
  const int64_t pairs = (N + 2 * kPanel - 1) / (2 * kPanel);
  const int nt = std::min<int64_t>(threads_for(M * N * K / 16), pairs);
#pragma omp parallel num_threads(nt)
  for (int64_t m0 = 0; m0 < M; m0 += kRowBlock) {
    const int64_t m1 = std::min(M, m0 + kRowBlock);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t n0 = p * 2 * kPanel, w0 = panel_width(N, n0);
      const int64_t w1 = n0 + kPanel < N ? panel_width(N, n0 + kPanel) : 0;
      const float* B0 = wp + n0 * K;
      for (int64_t i = m0; i < m1; i += kRows)
        block(int(std::min<int64_t>(kRows, m1 - i)), K, x + i * K, K, B0, w0, B0 + w0 * K, w1,
              b ? b + n0 : nullptr, y + i * N + n0, N);
    }
  }
}

// The same products in plain loops (k in order, as above): where AVX-512 is missing.
void forward_plain(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                   int64_t N) {
#pragma omp parallel for num_threads(threads_for(M* N* K / 16)) schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n0 = 0; n0 < N; n0 += kPanel) {
      const int64_t w = panel_width(N, n0);
      const float* P = wp + n0 * K;
      for (int64_t j = 0; j < w; ++j) {
        float s = b ? b[n0 + j] : 0.f;
        for (int64_t k = 0; k < K; ++k) s += x[i * K + k] * P[k * w + j];
        y[i * N + n0 + j] = s;
      }
    }
}
}  // namespace

bool packed_linear_preferred(int64_t M) {
  if (const char* env = std::getenv("VIT_PACK"); env && *env) {
    if (std::strcmp(env, "off") == 0) return false;
    if (std::strcmp(env, "on") == 0) return true;
  }
  // Measured on whole models (docs/benchmarks.md): ahead of oneDNN's sgemm up to about 800
  // rows (batch 4 at 197 tokens) on two threads (ViT-B/16: 1.29x at batch 1, 1.13x at 4) and
  // on one (ViT-Ti/S/B batch 1: 1.06-1.10x; batch 4 level); behind at 1576 rows and more.
  return simd::avx512() && M <= kPreferredRows;
}

namespace {
// Each 16-row block of w[N,K] transposed to [K, width] (to_panels) or back, in place.
void transpose_panels(float* w, int64_t N, int64_t K, bool to_panels) {
  std::vector<float> tmp(size_t(kPanel * K));
  for (int64_t n0 = 0; n0 < N; n0 += kPanel) {
    const int64_t pw = panel_width(N, n0);
    float* blk = w + n0 * K;
    if (to_panels)
      transpose(tmp.data(), pw, blk, K, pw, K);  // [pw, K] -> [K, pw]
    else
      transpose(tmp.data(), K, blk, pw, K, pw);  // [K, pw] -> [pw, K]
    std::copy(tmp.begin(), tmp.begin() + pw * K, blk);
  }
}
}  // namespace

void pack_panels(float* w, int64_t N, int64_t K) {
  transpose_panels(w, N, K, true);
}

void unpack_panels(float* w, int64_t N, int64_t K) {
  transpose_panels(w, N, K, false);
}

void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N) {
  if (M == 0 || N == 0) return;
  if (simd::avx512()) return forward_avx512(y, x, wp, b, M, K, N);
  forward_plain(y, x, wp, b, M, K, N);
}

}  // namespace vit::cpu
