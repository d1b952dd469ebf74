// The residual sums x + droppath(gamma * dropout(branch)), drop path (stochastic depth) per
// sample and dropout per element with counter-based masks (dropout.cpp's), optional
// LayerScale gamma; with the LayerNorm that reads the sum, and the backward.
#include <algorithm>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "core/rng.h"

namespace vit::cpu {

namespace {
// Per-sample scale of the branch under drop path: 0 or 1/(1-p).
inline float path_scale(int64_t b, float path_p, uint64_t path_key) {
  if (path_p <= 0.f) return 1.f;
  return uniform_at(path_key, b) >= path_p ? 1.f / (1.f - path_p) : 0.f;
}

// residual_forward, and with norm each sample's LayerNorm right after its sum.
void residual(float* out, const float* x, float* branch, const float* gamma, int64_t B, int64_t T, int64_t C,
              float drop_p, uint64_t drop_key, float path_p, uint64_t path_key, int64_t first_sample,
              const NormOut* norm) {
  dropout_forward(branch, B * T * C, drop_p, drop_key, first_sample * T * C);
  // Without LayerScale a sample is one run of x + s branch: the kernel table's (kernel_set.h).
  const ResidualRun run = gamma ? nullptr : kernels().residual_run;
  for_items(B, [&](int64_t b) {
    const float s = path_scale(first_sample + b, path_p, path_key);
    if (run) {
      run(out + b * T * C, x + b * T * C, branch + b * T * C, s, T * C);
    } else {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = (b * T + t) * C;
        if (gamma)
          for (int64_t c = 0; c < C; ++c) out[r + c] = x[r + c] + s * (gamma[c] * branch[r + c]);
        else
          for (int64_t c = 0; c < C; ++c) out[r + c] = x[r + c] + s * branch[r + c];
      }
    }
    if (norm)
      layernorm_rows(norm->y, norm->mean, norm->rstd, out, norm->w, norm->b, b * T, (b + 1) * T, C,
                     norm->eps);
  });
}
}  // namespace

void residual_forward(float* out, const float* x, float* branch, const float* gamma, int64_t B, int64_t T,
                      int64_t C, float drop_p, uint64_t drop_key, float path_p, uint64_t path_key,
                      int64_t first_sample) {
  residual(out, x, branch, gamma, B, T, C, drop_p, drop_key, path_p, path_key, first_sample, nullptr);
}

void residual_layernorm_forward(float* out, const float* x, float* branch, const float* gamma, int64_t B,
                                int64_t T, int64_t C, float drop_p, uint64_t drop_key, float path_p,
                                uint64_t path_key, int64_t first_sample, const NormOut& norm) {
  residual(out, x, branch, gamma, B, T, C, drop_p, drop_key, path_p, path_key, first_sample, &norm);
}

void residual_backward(float* dbranch, float* dgamma, const float* dout, const float* branch,
                       const float* gamma, int64_t B, int64_t T, int64_t C, float drop_p, uint64_t drop_key,
                       float path_p, uint64_t path_key, int64_t first_sample) {
  if (dgamma) {
    // dgamma[c] += sum over (b, t) of s_b dout * dropped branch; columns per thread, rows in
    // order, so the sum does not depend on the thread count.
    const int64_t blk = 16;
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < C; c0 += blk) {
      const int64_t c1 = std::min(C, c0 + blk);
      float acc[16] = {0};
      for (int64_t b = 0; b < B; ++b) {
        const float s = path_scale(first_sample + b, path_p, path_key);
        if (s == 0.f) continue;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t r = (b * T + t) * C;
          for (int64_t c = c0; c < c1; ++c) acc[c - c0] += s * dout[r + c] * branch[r + c];
        }
      }
      for (int64_t c = c0; c < c1; ++c) dgamma[c] += acc[c - c0];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    const float s = path_scale(first_sample + b, path_p, path_key);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t r = (b * T + t) * C;
      if (gamma)
        for (int64_t c = 0; c < C; ++c) dbranch[r + c] = s * gamma[c] * dout[r + c];
      else
        for (int64_t c = 0; c < C; ++c) dbranch[r + c] = s * dout[r + c];
    }
  }
  dropout_backward(dbranch, B * T * C, drop_p, drop_key, first_sample * T * C);
}

}  // namespace vit::cpu
