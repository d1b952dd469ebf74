// Exact GELU (nn.GELU(approximate='none')), forward and backward: the plain reference
// (std::erf) and the dispatch to the instruction-set kernels (gelu.h), whose threads are
// split here: per-thread chunks of whole vectors (elements) or of rows.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gelu.h"
#include "core/threads.h"

namespace vit::cpu {

void gelu_forward_reference(float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * kInvSqrt2));
}

void gelu_backward_reference(float* dx, const float* dy, const float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

void gelu_forward(float* y, const float* x, int64_t n) {
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512:
      return by_vector_chunks(n, [&](int64_t i0, int64_t i1) { avx512::gelu_forward(y, x, i0, i1); });
    case Isa::avx2:
      return by_vector_chunks(n, [&](int64_t i0, int64_t i1) { avx2::gelu_forward(y, x, i0, i1); });
#endif
#if VIT_ISA_NEON
    case Isa::neon:
      return by_vector_chunks(n, [&](int64_t i0, int64_t i1) { neon::gelu_forward(y, x, i0, i1); });
#endif
    default: return gelu_forward_reference(y, x, n);
  }
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512:
      return by_vector_chunks(n, [&](int64_t i0, int64_t i1) { avx512::gelu_backward(dx, dy, x, i0, i1); });
    case Isa::avx2:
      return by_vector_chunks(n, [&](int64_t i0, int64_t i1) { avx2::gelu_backward(dx, dy, x, i0, i1); });
#endif
#if VIT_ISA_NEON
    case Isa::neon:
      return by_vector_chunks(n, [&](int64_t i0, int64_t i1) { neon::gelu_backward(dx, dy, x, i0, i1); });
#endif
    default: return gelu_backward_reference(dx, dy, x, n);
  }
}

void bias_gelu_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad) {
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512:
      return by_row_ranges(
          M, N, [&](int64_t r0, int64_t r1) { avx512::bias_gelu_rows(y, h, bias, N, r0, r1, keep_grad); });
    case Isa::avx2:
      return by_row_ranges(
          M, N, [&](int64_t r0, int64_t r1) { avx2::bias_gelu_rows(y, h, bias, N, r0, r1, keep_grad); });
#endif
#if VIT_ISA_NEON
    case Isa::neon:
      return by_row_ranges(
          M, N, [&](int64_t r0, int64_t r1) { neon::bias_gelu_rows(y, h, bias, N, r0, r1, keep_grad); });
#endif
    default: break;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < N; ++j) {
      const float v = h[r * N + j] + bias[j];
      const float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
      y[r * N + j] = v * cdf;  // 0.5 v (1 + erf) with one erf: halving is exact
      if (keep_grad) h[r * N + j] = cdf + v * (kInvSqrt2Pi * std::exp(-0.5f * v * v));
    }
}

void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad) {
  // The vector paths multiply and sum in one pass, in colsum_add's blocks of columns.
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512: return avx512::bias_gelu_backward(dx, db, dy, grad, M, N, clear_grad);
    case Isa::avx2:
      return by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) {
        avx2::bias_gelu_backward_columns(dx, db, dy, grad, M, N, j0, j1, clear_grad);
      });
#endif
#if VIT_ISA_NEON
    case Isa::neon:
      return by_column_blocks(N, M * N, [&](int64_t j0, int64_t j1) {
        neon::bias_gelu_backward_columns(dx, db, dy, grad, M, N, j0, j1, clear_grad);
      });
#endif
    default: break;  // the plain path below: the multiply (vectorized), then colsum_add's loop
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M * N; ++i) {
    dx[i] = dy[i] * grad[i];
    if (clear_grad) grad[i] = 0.f;
  }
  colsum_add(db, dx, M, N);
}

}  // namespace vit::cpu
