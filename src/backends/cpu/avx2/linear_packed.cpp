// The packed small-batch linear's AVX2 + FMA kernel (linear_packed.cpp packs the weights in
// 64-wide panels, linear_packed.h, and dispatches here): 6 rows of x times 16 columns of a
// panel (12 accumulators of 16 registers) over k chunks of 384, so that the 16-column slice of
// the panel (24 KiB) stays in L1 while every row block passes over it. Every output is one
// fma chain over k in order by one thread, whatever the thread count; GELU, when asked, is a
// pass over y afterwards (linear_packed.cpp).
#include <algorithm>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/linear_packed.h"

namespace vit::cpu::avx2 {

namespace {
constexpr int64_t kRows = 6;     // rows of x per register block
constexpr int64_t kCols = 16;    // columns per register block: 2 vectors
constexpr int64_t kChunk = 384;  // k per pass

// R rows of x (leading dim ldx) times columns [0, n) (n <= 16) of panel rows B (leading dim
// ldb) over kc values of k into c (leading dim ldc): from the bias (or 0) when first, else
// adding onto what c holds.
template <int R>
VIT_AVX2 void block(const float* x, int64_t ldx, const float* B, int64_t ldb, int64_t n, int64_t kc,
                    bool first, const float* bias, float* c, int64_t ldc) {
  __m256 acc[R][2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    const int64_t m = n - 8 * j;
    const __m256 b0 = first && bias ? load(bias + 8 * j, m) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][j] = first ? b0 : load(c + r * ldc + 8 * j, m);
  }
  if (n == kCols) {
    for (int64_t k = 0; k < kc; ++k) {
      const __m256 v0 = _mm256_loadu_ps(B + k * ldb), v1 = _mm256_loadu_ps(B + k * ldb + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(x + r * ldx + k);
        acc[r][0] = _mm256_fmadd_ps(a, v0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, v1, acc[r][1]);
      }
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const __m256 v0 = load(B + k * ldb, n), v1 = load(B + k * ldb + 8, n - 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(x + r * ldx + k);
        acc[r][0] = _mm256_fmadd_ps(a, v0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, v1, acc[r][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) store(c + r * ldc + 8 * j, n - 8 * j, acc[r][j]);
}

}  // namespace

void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N) {
  slices_forward<kRows, kCols, kChunk>([]<int R>(auto... a) { block<R>(a...); }, y, x, wp, b, M, K, N);
}

}  // namespace vit::cpu::avx2
