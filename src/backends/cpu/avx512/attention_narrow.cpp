// The attention backward of one narrow head (D <= 8, T <= 96: mnist-seed's D = 4, T = 50)
// in one pass over the query rows, keys along the vector lanes. The general path
// (attention.cpp) makes dS in register blocks and then runs three T x D x T products, each
// with a transposed copy of its input or output: at D = 4 those products and copies took
// about half of the backward. Here:
//   dv^T = dO^T P first, [D, T] accumulators in registers over all query rows;
//   then each block of R query rows makes dP = dO v^T and dS in registers, and while dS is
//   there adds dk^T += q^T dS (accumulators in L1) and makes the block's dq = dS k, per row
//   a dot product over keys: D vectors of partial sums, reduced across lanes 16 at a time.
// Sums over query rows (dv, dk) run in row order as in the general path's products, and dv
// has its bits; dS's row sums and dq's sums over keys are reduced across lanes in another
// order, so dq and dk differ from it in the last bits (tests: against plain loops in double).
// With no transposed copies of P or dS and no separate products, it is the faster backward
// (docs/design.md, "Matrix products: oneDNN on x86-64, OpenBLAS on aarch64").
// Declared in kernels.h; attention.cpp calls it where isa() is avx512.
#include <cmath>
#include <utility>
#include <vector>

#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_table.h"

namespace vit::cpu::avx512 {

namespace {
constexpr int kMaxD = 8, kMaxNV = 6;

// Lanes' sums 16 at a time: reduce4 takes 4 vectors to one whose 128-bit block k holds
// each one's sum over block k (x0, x1, x2, x3 in that order); reduce_blocks takes 4 of those
// to one vector whose lane 4p + m is the whole sum of vector m of b[p]. 45 instructions for
// 16 sums, against ~130 for 16 separate reductions (simd::hsum).
VIT_NO_ASAN VIT_AVX512 inline __m512 reduce4(__m512 x0, __m512 x1, __m512 x2, __m512 x3) {
  const __m512 a = _mm512_add_ps(_mm512_unpacklo_ps(x0, x1), _mm512_unpackhi_ps(x0, x1));
  const __m512 b = _mm512_add_ps(_mm512_unpacklo_ps(x2, x3), _mm512_unpackhi_ps(x2, x3));
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
VIT_NO_ASAN VIT_AVX512 inline __m512 reduce_blocks(__m512 b0, __m512 b1, __m512 b2, __m512 b3) {
  const __m512 c0 = _mm512_add_ps(_mm512_shuffle_f32x4(b0, b1, 0x44), _mm512_shuffle_f32x4(b0, b1, 0xEE));
  const __m512 c1 = _mm512_add_ps(_mm512_shuffle_f32x4(b2, b3, 0x44), _mm512_shuffle_f32x4(b2, b3, 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(c0, c1, 0x88), _mm512_shuffle_f32x4(c0, c1, 0xDD));
}

// Query rows per block: R x D dq sums fill one reduce_blocks, R x NV dS vectors stay <= 24.
constexpr int rows_per_block(int D, int NV) {
  const int r = 16 / D, cap = 24 / NV;
  return r < cap ? r : cap;
}

template <int D, int NV>
VIT_NO_ASAN VIT_AVX512 void backward_head(float* dq, float* dk, float* dv, const float* q, const float* k,
                                          const float* v, int64_t ld, const float* dO, int64_t ldo,
                                          const float* P, int64_t T, float scale) {
  constexpr int R = rows_per_block(D, NV), L = 16 * NV;
  thread_local Scratch<float> scratch;  // vT, kT, dvT, dkT, each [D, L]
  float* vT = grown(scratch, 4 * D * L);
  float* kT = vT + D * L;
  float* dvT = kT + D * L;
  float* dkT = dvT + D * L;
  head_transpose(vT, L, v, ld, T, D);
  head_transpose(kT, L, k, ld, T, D);
  for (int64_t i = 0; i < D * L; i += 16) _mm512_storeu_ps(dkT + i, _mm512_setzero_ps());
  __mmask16 range[NV];
#pragma GCC unroll 8
  for (int u = 0; u < NV; ++u) range[u] = simd::lanes(T - 16 * u);
  const __m512 one = _mm512_set1_ps(1.f);
  // dv^T = dO^T P, in registers, summed over rows in order.
  {
    __m512 acc[D][NV];
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d)
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) acc[d][u] = _mm512_setzero_ps();
    for (int64_t i = 0; i < T; ++i) {
      const float* o = dO + i * ldo;
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) {
        const __m512 pu = _mm512_maskz_loadu_ps(range[u], P + i * T + 16 * u);
#pragma GCC unroll 8
        for (int d = 0; d < D; ++d) acc[d][u] = _mm512_fmadd_ps(_mm512_set1_ps(o[d]), pu, acc[d][u]);
      }
    }
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d)
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) _mm512_storeu_ps(dvT + d * L + 16 * u, acc[d][u]);
  }
  // A last block of fewer than R rows reads zero rows of dO, q and P past T: their dS is 0
  // and they add nothing (exact zeros) to dv^T and dk^T; their dq is not stored.
  alignas(64) static const float zeros[16 * kMaxNV] = {};
  for (int64_t i0 = 0; i0 < T; i0 += R) {
    const int rows = int(T - i0 < R ? T - i0 : R);
    const float *o[R], *p[R], *qr[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const bool in = r < rows;
      o[r] = in ? dO + (i0 + r) * ldo : zeros;
      p[r] = in ? P + (i0 + r) * T : zeros;
      qr[r] = in ? q + (i0 + r) * ld : zeros;
    }
    // dP = dO v^T.
    __m512 c[R][NV];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) c[r][u] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d)
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) {
        const __m512 b = _mm512_maskz_loadu_ps(range[u], vT + d * L + 16 * u);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) c[r][u] = _mm512_fmadd_ps(_mm512_set1_ps(o[r][d]), b, c[r][u]);
      }
    // dS = P (dP - sum_j P dP), as head_scores' SoftmaxBackward epilogue computes it.
    // The rows' sums over lanes 4 at a time: reduce4, then each 128-bit block's 4 sums added
    // across blocks, so every block holds the 4 totals.
    constexpr int RG = (R + 3) / 4 * 4;
    __m512 dot[RG];
#pragma GCC unroll 16
    for (int r = 0; r < RG; ++r) {
      dot[r] = _mm512_setzero_ps();
      if (r < R)
#pragma GCC unroll 8
        for (int u = 0; u < NV; ++u) {
          c[r][u] = _mm512_maskz_mul_ps(range[u], c[r][u], one);
          dot[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(range[u], p[r] + 16 * u), c[r][u], dot[r]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < RG / 4; ++g) {
      __m512 t = reduce4(dot[4 * g], dot[4 * g + 1], dot[4 * g + 2], dot[4 * g + 3]);
      t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, 0x4E));
      t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, 0xB1));
      dot[4 * g] = _mm512_permute_ps(t, 0x00), dot[4 * g + 1] = _mm512_permute_ps(t, 0x55);
      dot[4 * g + 2] = _mm512_permute_ps(t, 0xAA), dot[4 * g + 3] = _mm512_permute_ps(t, 0xFF);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u)
        c[r][u] =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(range[u], p[r] + 16 * u), _mm512_sub_ps(c[r][u], dot[r]));
        // dk^T += q^T dS over this block's rows, in row order.
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      __m512 qd[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) qd[r] = _mm512_set1_ps(qr[r][d]);
#pragma GCC unroll 8
      for (int u = 0; u < NV; ++u) {
        float* ak = dkT + d * L + 16 * u;
        __m512 sk = _mm512_loadu_ps(ak);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) sk = _mm512_fmadd_ps(qd[r], c[r][u], sk);
        _mm512_storeu_ps(ak, sk);
      }
    }
    // dq = scale dS k: the lanes' partial sums of (row, d) pair n = r D + d, reduced 4 at a
    // time as they are made (reduce4), then 16 at a time (reduce_blocks).
    constexpr int N = R * D, NB = (N + 15) / 16 * 4;
    __m512 x[4], b[NB];
#pragma GCC unroll 16
    for (int n = 0; n < NB * 4; ++n) {
      if (n < N) {
        const int r = n / D, d = n % D;
        __m512 a = _mm512_mul_ps(c[r][0], _mm512_maskz_loadu_ps(range[0], kT + d * L));
#pragma GCC unroll 8
        for (int u = 1; u < NV; ++u)
          a = _mm512_fmadd_ps(c[r][u], _mm512_maskz_loadu_ps(range[u], kT + d * L + 16 * u), a);
        x[n % 4] = a;
      } else {
        x[n % 4] = _mm512_setzero_ps();
      }
      if (n % 4 == 3) b[n / 4] = reduce4(x[0], x[1], x[2], x[3]);
    }
    alignas(64) float sums[NB * 4];
    const __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 4
    for (int g = 0; g < NB / 4; ++g)
      _mm512_store_ps(sums + 16 * g,
                      _mm512_mul_ps(reduce_blocks(b[4 * g], b[4 * g + 1], b[4 * g + 2], b[4 * g + 3]), vs));
    for (int r = 0; r < rows; ++r)
      for (int d = 0; d < D; ++d) dq[(i0 + r) * ld + d] = sums[r * D + d];
  }
  // dk = scale (dk^T)^T, dv = (dv^T)^T.
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < D * L; i += 16)
    _mm512_storeu_ps(dkT + i, _mm512_mul_ps(_mm512_loadu_ps(dkT + i), vs));
  head_transpose(dk, ld, dkT, L, D, T);
  head_transpose(dv, ld, dvT, L, D, T);
}

}  // namespace

VIT_NARROW_BACKWARD_ENTRIES(16)

}  // namespace vit::cpu::avx512
