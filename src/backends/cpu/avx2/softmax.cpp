// Attention's row softmax and its backward in AVX2 + FMA (softmax.h), and warm_rows: the AVX-512 kernels'
// passes (max; exp and sum; scale) in 8 lanes, 4 rows interleaved so that one row's max and
// sum chains do not stall the others; each row's arithmetic is the same whichever rows it
// is grouped with.
#include <limits>

#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/softmax.h"

namespace vit::cpu::avx2 {

namespace {
// The full vectors of a row use plain loads and stores, its last n % 8 floats masked ones;
// the tail's exps stay in registers (et) from the exp pass to the scale: reading back what a
// masked store just wrote waits for the store to complete (no store forwarding from
// vmaskmov; docs/design.md, "Instruction sets").
template <int R>
VIT_AVX2 void softmax_rows_t(float* P, int64_t ld, int64_t n, const uint8_t* km) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (km)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < n; ++j)
        if (!km[j]) P[r * ld + j] = kNegInf;
  const int64_t nf = n & ~int64_t(7);  // floats in full vectors; n - nf in the tail
  const __m256i tm = tail_mask(n - nf);
  const __m256 ninf = _mm256_set1_ps(kNegInf), live = _mm256_castsi256_ps(tm);
  __m256 mx[R], sum[R], vmax[R], et[R];
  bool dead[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) mx[r] = ninf, sum[r] = et[r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nf; j += 8)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) mx[r] = _mm256_max_ps(mx[r], _mm256_loadu_ps(P + r * ld + j));
  if (nf < n)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)  // lanes past n read as -inf
      mx[r] = _mm256_max_ps(mx[r], _mm256_blendv_ps(ninf, _mm256_maskload_ps(P + r * ld + nf, tm), live));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float rmax = hmax(mx[r]);
    dead[r] = rmax == kNegInf;
    vmax[r] = _mm256_set1_ps(dead[r] ? 0.f : rmax);  // a dead row's exps are all 0
  }
  for (int64_t j = 0; j < nf; j += 8)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* row = P + r * ld + j;
      const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(row), vmax[r]));
      _mm256_storeu_ps(row, e);
      sum[r] = _mm256_add_ps(sum[r], e);
    }
  if (nf < n)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      et[r] =
          _mm256_and_ps(live, exp_nonpos(_mm256_sub_ps(_mm256_maskload_ps(P + r * ld + nf, tm), vmax[r])));
      sum[r] = _mm256_add_ps(sum[r], et[r]);
    }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 inv = _mm256_set1_ps(dead[r] ? 0.f : 1.f / hsum(sum[r]));
    float* row = P + r * ld;
    for (int64_t j = 0; j < nf; j += 8)
      _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
    if (nf < n) store(row + nf, n - nf, _mm256_mul_ps(et[r], inv));
  }
}

template <int R>
VIT_AVX2 void softmax_backward_rows_t(float* d, const float* p, int64_t ld, int64_t n) {
  const int64_t nf = n & ~int64_t(7);  // as softmax_rows_t: full vectors, then a masked tail
  const __m256i tm = tail_mask(n - nf);
  __m256 dot[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nf; j += 8)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      dot[r] = _mm256_fmadd_ps(_mm256_loadu_ps(p + r * ld + j), _mm256_loadu_ps(d + r * ld + j), dot[r]);
  if (nf < n)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      dot[r] = _mm256_fmadd_ps(_mm256_maskload_ps(p + r * ld + nf, tm),
                               _mm256_maskload_ps(d + r * ld + nf, tm), dot[r]);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 s = _mm256_set1_ps(hsum(dot[r]));
    const float* pr = p + r * ld;
    float* dr = d + r * ld;
    for (int64_t j = 0; j < nf; j += 8)
      _mm256_storeu_ps(dr + j,
                       _mm256_mul_ps(_mm256_loadu_ps(pr + j), _mm256_sub_ps(_mm256_loadu_ps(dr + j), s)));
    if (nf < n)
      store(
          dr + nf, n - nf,
          _mm256_mul_ps(_mm256_maskload_ps(pr + nf, tm), _mm256_sub_ps(_mm256_maskload_ps(dr + nf, tm), s)));
  }
}
}  // namespace

void softmax_rows(float* P, int64_t rows, int64_t n, const uint8_t* km) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) softmax_rows_t<4>(P + i * n, n, n, km);
  for (; i < rows; ++i) softmax_rows_t<1>(P + i * n, n, n, km);
}

void softmax_backward_rows(float* dP, const float* P, int64_t rows, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) softmax_backward_rows_t<4>(dP + i * n, P + i * n, n, n);
  for (; i < rows; ++i) softmax_backward_rows_t<1>(dP + i * n, P + i * n, n, n);
}

VIT_AVX2 void exp_nonpos(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) store(y + i, n - i, avx2::exp_nonpos(load(x + i, n - i)));
}

// One load per 64 bytes: each cache line of p[0, n) is read once (a tail under 16 floats is
// left, as on AVX-512).
VIT_AVX2 void warm_rows(const float* p, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i + 16 <= n; i += 16) acc = _mm256_max_ps(acc, _mm256_loadu_ps(p + i));
  volatile float sink = hmax(acc);  // keeps the loads
  (void)sink;
}

}  // namespace vit::cpu::avx2
