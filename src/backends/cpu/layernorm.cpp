// LayerNorm over the last dimension (nn.LayerNorm, biased variance), forward and backward:
// the plain reference loops and the dispatch to the instruction-set kernels (layernorm.h),
// whose threads are split here: rows per thread, or blocks of columns per thread for the
// parameter gradients (each column summed over the rows in order, whatever the threads).
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/layernorm.h"
#include "core/threads.h"

namespace vit::cpu {

namespace {
// Rows [0, M) split into one contiguous range per thread.
template <typename F>
void by_rows(int64_t M, int64_t C, F&& f) {
  const int nt = threads_for(M * C * 4);
  const int64_t per = (M + nt - 1) / nt;
  on_threads(nt, [&](int t) {
    const int64_t i0 = t * per, i1 = i0 + per < M ? i0 + per : M;
    if (i0 < i1) f(i0, i1);
  });
}

// Parameter gradients, the plain loops: 16-column blocks per thread, rows in order.
void layernorm_param_grads_reference(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                     const float* rstd, int64_t M, int64_t C) {
  const int64_t blk = 16;
#pragma omp parallel for num_threads(threads_for(M* C * 2)) schedule(static)
  for (int64_t j0 = 0; j0 < C; j0 += blk) {
    int64_t j1 = j0 + blk < C ? j0 + blk : C;
    float aw[16] = {0}, ab[16] = {0};
    for (int64_t i = 0; i < M; ++i) {
      float m = mean[i], s = rstd[i];
      for (int64_t j = j0; j < j1; ++j) {
        float g = dy[i * C + j];
        aw[j - j0] += g * (x[i * C + j] - m) * s;
        ab[j - j0] += g;
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      dw[j] += aw[j - j0];
      db[j] += ab[j - j0];
    }
  }
}

// Parameter gradients: column blocks per thread, rows in order (deterministic).
void layernorm_param_grads(float* dw, float* db, const float* dy, const float* x, const float* mean,
                           const float* rstd, int64_t M, int64_t C) {
  auto columns = [&](auto kernel) {
    by_column_blocks(C, M * C * 2,
                     [&](int64_t j0, int64_t j1) { kernel(dw, db, dy, x, mean, rstd, M, C, j0, j1); });
  };
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512: return columns(avx512::param_grads_columns);
    case Isa::avx2: return columns(avx2::param_grads_columns);
#endif
#if VIT_ISA_NEON
    case Isa::neon: return columns(neon::param_grads_columns);
#endif
    default: return layernorm_param_grads_reference(dw, db, dy, x, mean, rstd, M, C);
  }
}
}  // namespace

void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                    int64_t i0, int64_t i1, int64_t C, float eps) {
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512: return avx512::layernorm_rows(y, mean, rstd, x, w, b, i0, i1, C, eps);
    case Isa::avx2: return avx2::layernorm_rows(y, mean, rstd, x, w, b, i0, i1, C, eps);
#endif
#if VIT_ISA_NEON
    case Isa::neon: return neon::layernorm_rows(y, mean, rstd, x, w, b, i0, i1, C, eps);
#endif
    default:
      return layernorm_forward_reference(y + i0 * C, mean ? mean + i0 : nullptr, rstd ? rstd + i0 : nullptr,
                                         x + i0 * C, w, b, i1 - i0, C, eps);
  }
}

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t M, int64_t C, float eps) {
  if (isa() == Isa::generic) return layernorm_forward_reference(y, mean, rstd, x, w, b, M, C, eps);
  by_rows(M, C, [&](int64_t i0, int64_t i1) { layernorm_rows(y, mean, rstd, x, w, b, i0, i1, C, eps); });
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int64_t M, int64_t C, bool accumulate_dx,
                        float* dxsum) {
  if (!dx) return layernorm_param_grads(dw, db, dy, x, mean, rstd, M, C);
  auto dx_rows = [&](auto kernel) {
    by_rows(M, C,
            [&](int64_t i0, int64_t i1) { kernel(dx, dy, x, mean, rstd, w, i0, i1, C, accumulate_dx); });
  };
  switch (isa()) {
#if VIT_ISA_X86
    case Isa::avx512:
      // One thread (a training lane) and rows the column passes sum in order: one pass.
      if (avx512::one_pass_backward_fits(C) && threads_for(M * C * 4) == 1)
        return avx512::layernorm_backward_one_pass(dx, dw, db, dxsum, dy, x, mean, rstd, w, M, C,
                                                   accumulate_dx);
      dx_rows(avx512::layernorm_dx_rows);
      break;
    case Isa::avx2: dx_rows(avx2::layernorm_dx_rows); break;
#endif
#if VIT_ISA_NEON
    case Isa::neon: dx_rows(neon::layernorm_dx_rows); break;
#endif
    default:
      layernorm_backward_reference(dx, dw, db, dy, x, mean, rstd, w, M, C, accumulate_dx);
      if (dxsum) colsum_add(dxsum, dx, M, C);
      return;
  }
  layernorm_param_grads(dw, db, dy, x, mean, rstd, M, C);
  if (dxsum) colsum_add(dxsum, dx, M, C);
}

void layernorm_forward_reference(float* y, float* mean, float* rstd, const float* x, const float* w,
                                 const float* b, int64_t M, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* xi = x + i * C;
    float* yi = y + i * C;
    // Two passes in float (mean, then centered variance) to avoid cancellation.
    float m = 0.f;
    for (int64_t c = 0; c < C; ++c) m += xi[c];
    m /= C;
    float v = 0.f;
    for (int64_t c = 0; c < C; ++c) v += (xi[c] - m) * (xi[c] - m);
    v /= C;
    float s = 1.f / std::sqrt(v + eps);
    for (int64_t c = 0; c < C; ++c) yi[c] = (xi[c] - m) * s * w[c] + b[c];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

void layernorm_backward_reference(float* dx, float* dw, float* db, const float* dy, const float* x,
                                  const float* mean, const float* rstd, const float* w, int64_t M, int64_t C,
                                  bool accumulate_dx) {
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* xi = x + i * C;
    const float* dyi = dy + i * C;
    float m = mean[i], s = rstd[i];
    float sum_g = 0.f, sum_gx = 0.f;
    for (int64_t c = 0; c < C; ++c) {
      float g = dyi[c] * w[c];
      sum_g += g;
      sum_gx += g * (xi[c] - m) * s;
    }
    sum_g /= C;
    sum_gx /= C;
    float* dxi = dx + i * C;
    for (int64_t c = 0; c < C; ++c) {
      float v = s * (dyi[c] * w[c] - sum_g - (xi[c] - m) * s * sum_gx);
      dxi[c] = accumulate_dx ? dxi[c] + v : v;
    }
  }
  layernorm_param_grads_reference(dw, db, dy, x, mean, rstd, M, C);
}

}  // namespace vit::cpu
