// LayerNorm over the last dimension (nn.LayerNorm, biased variance), forward and backward:
// the kernel table's entries (kernel_set.h; layernorm.h for the vector paths', the plain loops
// below for generic), whose threads are split here: rows per thread, or blocks of columns per thread for the
// parameter gradients (each column summed over the rows in order, whatever the threads).
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
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

// Parameter gradients: column blocks per thread, rows in order (deterministic).
void layernorm_param_grads(float* dw, float* db, const float* dy, const float* x, const float* mean,
                           const float* rstd, int64_t M, int64_t C) {
  const LayerNormParamGrads kernel = kernels().layernorm_param_grads;
  by_column_blocks(C, M * C * 2,
                   [&](int64_t j0, int64_t j1) { kernel(dw, db, dy, x, mean, rstd, M, C, j0, j1); });
}
}  // namespace

void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                    int64_t i0, int64_t i1, int64_t C, float eps) {
  kernels().layernorm_rows(y, mean, rstd, x, w, b, i0, i1, C, eps);
}

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t M, int64_t C, float eps) {
  const LayerNormRows kernel = kernels().layernorm_rows;
  by_rows(M, C, [&](int64_t i0, int64_t i1) { kernel(y, mean, rstd, x, w, b, i0, i1, C, eps); });
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int64_t M, int64_t C, bool accumulate_dx,
                        float* dxsum) {
  if (!dx) return layernorm_param_grads(dw, db, dy, x, mean, rstd, M, C);
  const CpuKernels& k = kernels();
  // One thread (a training lane) and rows the column passes sum in order: one pass, where the
  // path has it.
  if (k.layernorm_backward_one_pass && k.layernorm_one_pass_fits(C) && threads_for(M * C * 4) == 1)
    return k.layernorm_backward_one_pass(dx, dw, db, dxsum, dy, x, mean, rstd, w, M, C, accumulate_dx);
  by_rows(M, C, [&](int64_t i0, int64_t i1) {
    k.layernorm_dx_rows(dx, dy, x, mean, rstd, w, i0, i1, C, accumulate_dx);
  });
  layernorm_param_grads(dw, db, dy, x, mean, rstd, M, C);
  if (dxsum) colsum_add(dxsum, dx, M, C);
}

// The generic table's kernels (kernel_set.h): plain loops, one thread.
void layernorm_rows_reference(float* y, float* mean, float* rstd, const float* x, const float* w,
                              const float* b, int64_t i0, int64_t i1, int64_t C, float eps) {
  for (int64_t i = i0; i < i1; ++i) {
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

void layernorm_dx_rows_reference(float* dx, const float* dy, const float* x, const float* mean,
                                 const float* rstd, const float* w, int64_t i0, int64_t i1, int64_t C,
                                 bool accumulate_dx) {
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
  for (int64_t i = i0; i < i1; ++i) {
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
}

void layernorm_param_grads_reference(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                     const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    float aw = 0.f, ab = 0.f;
    for (int64_t i = 0; i < M; ++i) {
      const float g = dy[i * C + j];
      aw += g * (x[i * C + j] - mean[i]) * rstd[i];
      ab += g;
    }
    dw[j] += aw;
    db[j] += ab;
  }
}

// The whole-tensor forms the tests compare with: the generic kernels over every row.
void layernorm_forward_reference(float* y, float* mean, float* rstd, const float* x, const float* w,
                                 const float* b, int64_t M, int64_t C, float eps) {
  layernorm_rows_reference(y, mean, rstd, x, w, b, 0, M, C, eps);
}

void layernorm_backward_reference(float* dx, float* dw, float* db, const float* dy, const float* x,
                                  const float* mean, const float* rstd, const float* w, int64_t M, int64_t C,
                                  bool accumulate_dx) {
  layernorm_dx_rows_reference(dx, dy, x, mean, rstd, w, 0, M, C, accumulate_dx);
  layernorm_param_grads_reference(dw, db, dy, x, mean, rstd, M, C, 0, C);
}

}  // namespace vit::cpu
