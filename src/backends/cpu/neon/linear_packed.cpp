// The packed small-batch linear's NEON kernel (linear_packed.cpp packs the weights in 64-wide
// panels, linear_packed.h, and dispatches here): avx2/linear_packed.cpp's blocking in 4-float
// vectors, 6 rows of x times 16 columns of a panel (24 accumulators and 4 weight vectors of
// the 32 registers) over k chunks of 384. The panel layout needs nothing of its own here: a
// 16-column slice is 4 vectors of every panel row, and a last panel narrower than 16 columns
// goes through simd.h's zero-padded tail loads. The loops over the block's rows and vectors
// are unrolled by pragma, so that GCC keeps the 24 accumulators in registers (without, it
// kept them in a stack array and stored them every k, as it did on AVX2); the walk
// (slices_forward) prefetches the next slice's weights as on AVX2. Every output is one
// fma chain over k in order by one thread, whatever the thread count; GELU, when asked, is
// applied as the sums leave the registers (as on AVX2 and AVX-512). Speed not measured
// (developed under qemu-user, which cannot time it).
#include <algorithm>

#include "backends/cpu/linear_packed.h"
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
constexpr int64_t kRows = 6;     // rows of x per register block
constexpr int kVecs = 4;         // vectors of columns per register block
constexpr int64_t kCols = 16;    // columns per register block: kVecs vectors
constexpr int64_t kChunk = 384;  // k per pass: the 16-column slice (24 KiB) stays in L1

// R rows of x (leading dim ldx) times columns [0, n) (n <= 16) of panel rows B (leading dim
// ldb) over kc values of k into c (leading dim ldc): from the bias (or 0) when first, else
// adding onto what c holds; GELU'd as stored with Gelu (a template argument, as on AVX2,
// where a run-time flag lost the fusion's gain).
template <int R, bool Gelu>
void block_gelu(const float* x, int64_t ldx, const float* B, int64_t ldb, int64_t n, int64_t kc, bool first,
                const float* bias, float* c, int64_t ldc) {
  float32x4_t acc[R][kVecs];
#pragma GCC unroll 4
  for (int j = 0; j < kVecs; ++j) {
    const int64_t m = n - 4 * j;
    const float32x4_t b0 = first && bias ? load(bias + 4 * j, m) : vdupq_n_f32(0.f);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][j] = first ? b0 : load(c + r * ldc + 4 * j, m);
  }
  if (n == kCols) {
    for (int64_t k = 0; k < kc; ++k) {
      float32x4_t v[kVecs];
#pragma GCC unroll 4
      for (int j = 0; j < kVecs; ++j) v[j] = vld1q_f32(B + k * ldb + 4 * j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float32x4_t a = vld1q_dup_f32(x + r * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < kVecs; ++j) acc[r][j] = vfmaq_f32(acc[r][j], a, v[j]);
      }
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      float32x4_t v[kVecs];
#pragma GCC unroll 4
      for (int j = 0; j < kVecs; ++j) v[j] = load(B + k * ldb + 4 * j, n - 4 * j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float32x4_t a = vld1q_dup_f32(x + r * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < kVecs; ++j) acc[r][j] = vfmaq_f32(acc[r][j], a, v[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < kVecs; ++j) store(c + r * ldc + 4 * j, n - 4 * j, Gelu ? gelu(acc[r][j]) : acc[r][j]);
}

template <int R>
void block(const float* x, int64_t ldx, const float* B, int64_t ldb, int64_t n, int64_t kc, bool first,
           bool last_gelu, const float* bias, float* c, int64_t ldc) {
  if (last_gelu)
    block_gelu<R, true>(x, ldx, B, ldb, n, kc, first, bias, c, ldc);
  else
    block_gelu<R, false>(x, ldx, B, ldb, n, kc, first, bias, c, ldc);
}

}  // namespace

void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu) {
  slices_forward<kRows, kCols, kChunk, false, kPanel>([]<int R>(auto... a) { block<R>(a...); }, y, x, wp, b,
                                                      M, K, N, gelu);
}

}  // namespace vit::cpu::neon
