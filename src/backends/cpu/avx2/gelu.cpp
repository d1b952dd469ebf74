// Exact GELU's AVX2 + FMA kernels (gelu.h): simd.h's erf (the AVX-512 path's formula,
// absolute error <= 1.5e-7), 8 lanes, tails through vmaskmov.
#include "backends/cpu/gelu.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_table.h"  // with_constant

namespace vit::cpu::avx2 {

namespace {
// GELU (simd.h's gelu_from) and, from the same erf and exp(-v^2 / 2), GELU'(v) = Phi(v) + v phi(v).
VIT_AVX2 inline __m256 gelu_grad_from(__m256 v, __m256 erf, __m256 e) {
  const __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_set1_ps(1.f), erf));
  return _mm256_fmadd_ps(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2Pi)), e, cdf);
}
VIT_AVX2 inline __m256 erf_of(__m256 v, __m256* e) {
  return erf(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2)), e);
}

// dx = dy * grad at element i, the first n of 8 lanes (grad cleared behind, with Clear);
// returns the product for the column sums.
template <bool Clear>
VIT_AVX2 inline __m256 mul_at(float* dx, const float* dy, float* grad, int64_t i, int64_t n) {
  const __m256 d = _mm256_mul_ps(load(dy + i, n), load(grad + i, n));
  store(dx + i, n, d);
  if constexpr (Clear) store(grad + i, n, _mm256_setzero_ps());
  return d;
}

// Column blocks of at most NV vectors: the sums in registers, every row in order. Only the
// last vector may be partial (one tail mask, no spills: 8 accumulators and 8 masks did not fit).
template <int NV, bool Clear>
VIT_AVX2 void mul_colsum_narrow(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                int64_t j0, int64_t j1) {
  __m256 acc[NV];
  const int64_t tail = j1 - j0 - 8 * (NV - 1);
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t r = 0; r < M; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      acc[v] = _mm256_add_ps(acc[v], mul_at<Clear>(dx, dy, grad, r * N + j0 + 8 * v, v + 1 < NV ? 8 : tail));
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    float* d = db + j0 + 8 * v;
    const int64_t n = v + 1 < NV ? 8 : tail;
    store(d, n, _mm256_add_ps(load(d, n), acc[v]));
  }
}

// Wider blocks: the sums in a per-thread buffer, so that the three matrices stream row by
// row instead of in strided pieces (as avx512/colsum.h's colsum_by_rows).
template <bool Clear>
VIT_AVX2 void mul_colsum_wide(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                              int64_t j0, int64_t j1) {
  thread_local Scratch<float> buf;
  const int64_t n = j1 - j0;
  float* acc = grown(buf, n);
  for (int64_t j = 0; j < n; j += 8) store(acc + j, n - j, _mm256_setzero_ps());
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < n; j += 8)
      store(acc + j, n - j,
            _mm256_add_ps(load(acc + j, n - j), mul_at<Clear>(dx, dy, grad, r * N + j0 + j, n - j)));
  for (int64_t j = 0; j < n; j += 8)
    store(db + j0 + j, n - j, _mm256_add_ps(load(db + j0 + j, n - j), load(acc + j, n - j)));
}

}  // namespace

VIT_AVX2 void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8) {
    store(y + i, i1 - i, gelu(load(x + i, i1 - i)));
  }
}

VIT_AVX2 void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8) {
    const __m256 v = load(x + i, i1 - i);
    __m256 e;
    const __m256 erf = erf_of(v, &e);  // before e is read: arguments have no order
    const __m256 g = gelu_grad_from(v, erf, e);
    store(dx + i, i1 - i, _mm256_mul_ps(load(dy + i, i1 - i), g));
  }
}

VIT_AVX2 void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                             bool keep_grad) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 8) {
      const int64_t i = r * N + j, n = N - j;
      const __m256 v = _mm256_add_ps(load(h + i, n), load(bias + j, n));
      __m256 e;
      const __m256 erf = erf_of(v, &e);
      store(y + i, n, gelu_from(v, erf));
      if (keep_grad) store(h + i, n, gelu_grad_from(v, erf, e));
    }
}

namespace {
// GELU's tanh form or QuickGELU of v, and its derivative in *g (when G), from exp of a
// non-positive argument alone: sigmoid(z) = 1 / (1 + e) for z >= 0, e / (1 + e) below, with
// e = exp(-|z|); tanh(u) = sign(u) (1 - e) / (1 + e) with e = exp(-2|u|).
template <Activation A, bool G>
VIT_AVX2 inline __m256 act_of(__m256 v, __m256* g) {
  const __m256 one = _mm256_set1_ps(1.f), sign_bit = _mm256_set1_ps(-0.f);
  if constexpr (A == Activation::quick_gelu) {
    const __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(kQuick));
    const __m256 e = exp_nonpos(_mm256_or_ps(z, sign_bit));  // exp(-|z|)
    const __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
    const __m256 s =
        _mm256_blendv_ps(_mm256_mul_ps(e, r), r, _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GE_OQ));
    if constexpr (G) *g = _mm256_fmadd_ps(_mm256_mul_ps(z, s), _mm256_sub_ps(one, s), s);
    return _mm256_mul_ps(v, s);
  } else {
    const __m256 v2 = _mm256_mul_ps(v, v);
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                   _mm256_fmadd_ps(_mm256_mul_ps(v2, v), _mm256_set1_ps(kTanhCubic), v));
    const __m256 e = exp_nonpos(_mm256_or_ps(_mm256_add_ps(u, u), sign_bit));  // exp(-2|u|)
    const __m256 a = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    const __m256 t = _mm256_or_ps(a, _mm256_and_ps(u, sign_bit));
    const __m256 half_v = _mm256_mul_ps(_mm256_set1_ps(0.5f), v);
    if constexpr (G) {
      // 0.5 (1 + t) + 0.5 v (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 v^2)
      const __m256 du = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                      _mm256_fmadd_ps(v2, _mm256_set1_ps(3.f * kTanhCubic), one));
      *g = _mm256_fmadd_ps(_mm256_mul_ps(half_v, _mm256_fnmadd_ps(t, t, one)), du,
                           _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(one, t)));
    }
    return _mm256_mul_ps(half_v, _mm256_add_ps(one, t));
  }
}

template <Activation A, bool G>
VIT_AVX2 void act_rows_t(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 8) {
      const int64_t i = r * N + j, n = N - j;
      const __m256 v = bias ? _mm256_add_ps(load(h + i, n), load(bias + j, n)) : load(h + i, n);
      __m256 g;
      store(y + i, n, act_of<A, G>(v, &g));
      if constexpr (G) store(h + i, n, g);
    }
}
}  // namespace

void act_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1, bool keep_grad,
              Activation act) {
  with_activation(act, keep_grad, [&]<Activation A, bool G>() { act_rows_t<A, G>(y, h, bias, N, r0, r1); });
}

// Each column's sum starts from zero and adds the rows in order before going into db, as
// colsum_columns does: the same bits whatever the width of the block.
void bias_gelu_backward_columns(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                int64_t j0, int64_t j1, bool clear_grad) {
  auto run = [&]<bool Clear>() {
    const bool narrow = with_constant<1, 2, 3, 4, 5, 6, 7, 8>(
        (j1 - j0 + 7) / 8, [&]<int NV>() { mul_colsum_narrow<NV, Clear>(dx, db, dy, grad, M, N, j0, j1); });
    if (!narrow && j1 > j0) mul_colsum_wide<Clear>(dx, db, dy, grad, M, N, j0, j1);
  };
  if (clear_grad)
    run.template operator()<true>();
  else
    run.template operator()<false>();
}

}  // namespace vit::cpu::avx2
