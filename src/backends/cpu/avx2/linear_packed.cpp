// The packed small-batch linear's AVX2 + FMA kernel (linear_packed.cpp packs the weights in
// 64-wide panels, each stored as four 16-column slices [K][16] on this path: linear_packed.h,
// packed_slice(); and dispatches here): 6 rows of x times one 16-column slice (12 accumulators
// of 16 registers) over k chunks of 384: a row block's 6 rows of x (9 KiB) stay in L1 while the
// panel's slices come from L2 (slices_forward's RowsOuter: each row block passes over the
// panel's four slices), each a contiguous stream of 64-byte lines, one per k. Inside [K][64]
// panels (the AVX-512 layout) a slice's rows are 256 bytes apart and fall on a quarter of L1's
// sets, so the slices stream better; the other loop orders and chunks tried were no better
// (docs/design.md, "Matrix products: oneDNN on x86-64, OpenBLAS on aarch64", for this and the
// rest). The walk (slices_forward) pulls the next slice's weights towards L2 while this one
// runs, so they do not come from memory, and hands the slices to the threads as they ask
// (SliceQueue), so a thread that falls behind does not hold up the rest. Every output is one
// fma chain over k in order, whoever runs it and whatever the thread count. GELU, when asked
// (fc1), is applied as the sums leave the registers, which saves the GELU pass's own parallel
// region and barrier.
#include <algorithm>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/linear_packed.h"

namespace vit::cpu::avx2 {

namespace {
constexpr int64_t kRows = 6;     // rows of x per register block
constexpr int64_t kCols = 16;    // columns per register block: 2 vectors, one stored slice
constexpr int64_t kChunk = 384;  // k per pass

// R rows of x (leading dim ldx) times columns [0, n) (n <= 16; n = 16 when Full) of panel rows
// B (leading dim ldb) over kc values of k into c (leading dim ldc): from the bias (or 0) when
// first, else adding onto what c holds; GELU'd as stored with Gelu (a template argument: a
// run-time flag lost the fusion's gain; docs/design.md, the section named above). One k loop
// for both widths, the masks made before it: with a loop per width sharing one accumulator
// array, GCC kept the array on the stack and stored all 12 accumulators every k (12 stores per
// 12 fmas).
template <int R, bool Full, bool Gelu>
VIT_AVX2 void block_width(const float* x, int64_t ldx, const float* B, int64_t ldb, int64_t n, int64_t kc,
                          bool first, const float* bias, float* c, int64_t ldc) {
  __m256i m[2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) m[j] = Full ? _mm256_set1_epi32(-1) : tail_mask(n - 8 * j);
  // Full widths move whole vectors: GCC keeps vmaskmov even under an all-ones mask, and AMD
  // cores run its store form slowly.
  auto load = [&](const float* p, int j)
                  VIT_AVX2 { return Full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m[j]); };
  __m256 acc[R][2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    const __m256 b0 = first && bias ? load(bias + 8 * j, j) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][j] = first ? b0 : load(c + r * ldc + 8 * j, j);
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m256 v[2];
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) v[j] = load(B + k * ldb + 8 * j, j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + r * ldx + k);
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) acc[r][j] = _mm256_fmadd_ps(a, v[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      const __m256 out = Gelu ? gelu(acc[r][j]) : acc[r][j];
      if (Full)
        _mm256_storeu_ps(c + r * ldc + 8 * j, out);
      else
        _mm256_maskstore_ps(c + r * ldc + 8 * j, m[j], out);
    }
}

template <int R>
VIT_AVX2 void block(const float* x, int64_t ldx, const float* B, int64_t ldb, int64_t n, int64_t kc,
                    bool first, bool last_gelu, const float* bias, float* c, int64_t ldc) {
  if (last_gelu) {
    if (n == kCols)
      block_width<R, true, true>(x, ldx, B, ldb, n, kc, first, bias, c, ldc);
    else
      block_width<R, false, true>(x, ldx, B, ldb, n, kc, first, bias, c, ldc);
  } else if (n == kCols)
    block_width<R, true, false>(x, ldx, B, ldb, n, kc, first, bias, c, ldc);
  else
    block_width<R, false, false>(x, ldx, B, ldb, n, kc, first, bias, c, ldc);
}

}  // namespace

void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu) {
  static_assert(kCols == kPackedSlice, "one register block per stored slice");
  slices_forward<kRows, kCols, kChunk, true, kPackedSlice>([]<int R>(auto... a) { block<R>(a...); }, y, x, wp,
                                                           b, M, K, N, gelu);
}

}  // namespace vit::cpu::avx2
