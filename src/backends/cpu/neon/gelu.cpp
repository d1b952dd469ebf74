// Exact GELU's NEON kernels (gelu.h): neon/simd.h's erf (the x86 paths' formula, absolute
// error <= 1.5e-7), 4 lanes, tails through a padded buffer.
#include "backends/cpu/gelu.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_table.h"  // with_constant
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
// GELU (simd.h's gelu_from) and, from the same erf and exp(-v^2 / 2), GELU'(v) = Phi(v) + v phi(v).
inline float32x4_t gelu_grad_from(float32x4_t v, float32x4_t erf, float32x4_t e) {
  const float32x4_t cdf = vmulq_n_f32(vaddq_f32(vdupq_n_f32(1.f), erf), 0.5f);
  return vfmaq_f32(cdf, vmulq_n_f32(v, kInvSqrt2Pi), e);
}
inline float32x4_t erf_of(float32x4_t v, float32x4_t* e) {
  return erf(vmulq_n_f32(v, kInvSqrt2), e);
}

// dx = dy * grad at element i, the first n of 4 lanes (grad cleared behind, with Clear);
// returns the product for the column sums.
template <bool Clear>
inline float32x4_t mul_at(float* dx, const float* dy, float* grad, int64_t i, int64_t n) {
  const float32x4_t d = vmulq_f32(load(dy + i, n), load(grad + i, n));
  store(dx + i, n, d);
  if constexpr (Clear) store(grad + i, n, vdupq_n_f32(0.f));
  return d;
}

// Column blocks of at most NV vectors: the sums in registers, every row in order. Only the
// last vector may be partial (one tail mask, no spills: 8 accumulators and 8 masks did not fit).
template <int NV, bool Clear>
void mul_colsum_narrow(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N, int64_t j0,
                       int64_t j1) {
  float32x4_t acc[NV];
  const int64_t tail = j1 - j0 - 4 * (NV - 1);
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = vdupq_n_f32(0.f);
  for (int64_t r = 0; r < M; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      acc[v] = vaddq_f32(acc[v], mul_at<Clear>(dx, dy, grad, r * N + j0 + 4 * v, v + 1 < NV ? 4 : tail));
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    float* d = db + j0 + 4 * v;
    const int64_t n = v + 1 < NV ? 4 : tail;
    store(d, n, vaddq_f32(load(d, n), acc[v]));
  }
}

// Wider blocks: the sums in a per-thread buffer, so that the three matrices stream row by
// row instead of in strided pieces.
template <bool Clear>
void mul_colsum_wide(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N, int64_t j0,
                     int64_t j1) {
  thread_local Scratch<float> buf;
  const int64_t n = j1 - j0;
  float* acc = grown(buf, n);
  for (int64_t j = 0; j < n; j += 4) store(acc + j, n - j, vdupq_n_f32(0.f));
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < n; j += 4)
      store(acc + j, n - j,
            vaddq_f32(load(acc + j, n - j), mul_at<Clear>(dx, dy, grad, r * N + j0 + j, n - j)));
  for (int64_t j = 0; j < n; j += 4)
    store(db + j0 + j, n - j, vaddq_f32(load(db + j0 + j, n - j), load(acc + j, n - j)));
}

}  // namespace

void gelu_forward(float* y, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 4) {
    store(y + i, i1 - i, gelu(load(x + i, i1 - i)));
  }
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 4) {
    const float32x4_t v = load(x + i, i1 - i);
    float32x4_t e;
    const float32x4_t erf = erf_of(v, &e);
    store(dx + i, i1 - i, vmulq_f32(load(dy + i, i1 - i), gelu_grad_from(v, erf, e)));
  }
}

void bias_gelu_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                    bool keep_grad) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 4) {
      const int64_t i = r * N + j, n = N - j;
      const float32x4_t v = vaddq_f32(load(h + i, n), load(bias + j, n));
      float32x4_t e;
      const float32x4_t erf = erf_of(v, &e);
      store(y + i, n, gelu_from(v, erf));
      if (keep_grad) store(h + i, n, gelu_grad_from(v, erf, e));
    }
}

// Each column's sum starts from zero and adds the rows in order before going into db, as
// colsum_columns does: the same bits whatever the width of the block.
namespace {
// GELU's tanh form or QuickGELU, as avx2/gelu.cpp's act_of: exp of -|z| (or -2|u|) alone.
template <Activation A, bool G>
inline float32x4_t act_of(float32x4_t v, float32x4_t* g) {
  const float32x4_t one = vdupq_n_f32(1.f);
  if constexpr (A == Activation::quick_gelu) {
    const float32x4_t z = vmulq_n_f32(v, kQuick);
    const float32x4_t e = exp_nonpos(vnegq_f32(vabsq_f32(z)));  // exp(-|z|)
    const float32x4_t r = vdivq_f32(one, vaddq_f32(one, e));
    const float32x4_t s = vbslq_f32(vcgeq_f32(z, vdupq_n_f32(0.f)), r, vmulq_f32(e, r));
    if constexpr (G) *g = vfmaq_f32(s, vmulq_f32(z, s), vsubq_f32(one, s));
    return vmulq_f32(v, s);
  } else {
    const float32x4_t v2 = vmulq_f32(v, v);
    const float32x4_t u = vmulq_n_f32(vfmaq_f32(v, vmulq_f32(v2, v), vdupq_n_f32(kTanhCubic)), kSqrt2OverPi);
    const float32x4_t e = exp_nonpos(vnegq_f32(vabsq_f32(vaddq_f32(u, u))));  // exp(-2|u|)
    const float32x4_t a = vdivq_f32(vsubq_f32(one, e), vaddq_f32(one, e));
    const float32x4_t t = vbslq_f32(vdupq_n_u32(0x80000000u), u, a);  // a with u's sign
    const float32x4_t half_v = vmulq_n_f32(v, 0.5f);
    if constexpr (G) {
      const float32x4_t du = vmulq_n_f32(vfmaq_f32(one, v2, vdupq_n_f32(3.f * kTanhCubic)), kSqrt2OverPi);
      *g = vfmaq_f32(vmulq_n_f32(vaddq_f32(one, t), 0.5f), vmulq_f32(half_v, vfmsq_f32(one, t, t)), du);
    }
    return vmulq_f32(half_v, vaddq_f32(one, t));
  }
}

template <Activation A, bool G>
void act_rows_t(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < N; j += 4) {
      const int64_t i = r * N + j, n = N - j;
      const float32x4_t v = bias ? vaddq_f32(load(h + i, n), load(bias + j, n)) : load(h + i, n);
      float32x4_t g;
      store(y + i, n, act_of<A, G>(v, &g));
      if constexpr (G) store(h + i, n, g);
    }
}
}  // namespace

void act_rows(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1, bool keep_grad,
              Activation act) {
  with_activation(act, keep_grad, [&]<Activation A, bool G>() { act_rows_t<A, G>(y, h, bias, N, r0, r1); });
}

void bias_gelu_backward_columns(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                int64_t j0, int64_t j1, bool clear_grad) {
  auto run = [&]<bool Clear>() {
    const bool narrow = with_constant<1, 2, 3, 4, 5, 6, 7, 8>(
        (j1 - j0 + 3) / 4, [&]<int NV>() { mul_colsum_narrow<NV, Clear>(dx, db, dy, grad, M, N, j0, j1); });
    if (!narrow && j1 > j0) mul_colsum_wide<Clear>(dx, db, dy, grad, M, N, j0, j1);
  };
  if (clear_grad)
    run.template operator()<true>();
  else
    run.template operator()<false>();
}

}  // namespace vit::cpu::neon
