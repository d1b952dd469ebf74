// The optimizer's element-wise work on the host: the update of every parameter tensor, and
// the gradient norm's sums and clipping scale.
#include <cmath>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

void optimizer_step(const ParamUpdate* u, int64_t count, const UpdateRule& r, int nt) {
  const float b1 = r.beta1, b2 = r.beta2, eps = r.eps, mom = r.momentum, bc2_sqrt = r.bias2_sqrt;
  const bool first = r.first;
  // One parallel region for the whole step, each thread a static share of every tensor
  // (no barrier between tensors: they are disjoint), rather than one region per tensor:
  // mnist-seed has 31 tensors of 8 to 1,000 floats, and 31 fork-joins took longer than the
  // arithmetic. Each element's update is the same whatever the threads.
#pragma omp parallel num_threads(nt)
  for (int64_t k = 0; k < count; ++k) {
    const float lr = u[k].lr, wd = u[k].wd;
    const float step_size = float(lr / r.bias1);
    float* p = u[k].p;
    const float* g = u[k].g;
    float *m = u[k].m, *v = u[k].v;
    const int64_t n = u[k].n;
    if (r.kind == OptimKind::sgd) {
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        float d = g[i] + wd * p[i];
        if (mom > 0.f) {
          m[i] = first ? d : mom * m[i] + d;  // torch: buffer starts as the first gradient
          d = r.nesterov ? d + mom * m[i] : m[i];
        }
        p[i] -= lr * d;
      }
    } else if (r.kind == OptimKind::adamw) {
      // Two loops rather than a branch inside one, so each vectorizes: scalar square roots and
      // divisions over ViT-B/16's 86M parameters were a visible share of a training step
      // (docs/design.md, "Fast kernels and threads").
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        const float gi = g[i];
        p[i] *= 1.f - lr * wd;
        m[i] = b1 * m[i] + (1.f - b1) * gi;
        v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
      }
    } else if (r.kind == OptimKind::lion) {
      // timm's Lion (its foreach code): decoupled decay, then a step of lr times the sign of
      // b1 m + (1 - b1) g (0 at 0), then m = b2 m + (1 - b2) g.
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        const float gi = g[i];
        p[i] *= 1.f - lr * wd;
        const float c = m[i] * b1 + gi * (1.f - b1);
        p[i] -= lr * float((c > 0.f) - (c < 0.f));
        m[i] = m[i] * b2 + gi * (1.f - b2);
      }
    } else {
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        const float gi = g[i] + wd * p[i];
        m[i] = b1 * m[i] + (1.f - b1) * gi;
        v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
      }
    }
  }
}

namespace {
// LAMB's update of one element from its moments (timm's Lamb, torch's float arithmetic):
// (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps) + wd p.
inline float lamb_update(float m, float v, float p, float wd, float bc1, const UpdateRule& r) {
  return (m / bc1) / (std::sqrt(v) / r.bias2_sqrt + r.eps) + wd * p;
}
}  // namespace

void lamb_moments(const ParamUpdate* u, int64_t count, const UpdateRule& r, double* update_sq,
                  double* weight_sq, int nt) {
  const float b1 = r.beta1, b2 = r.beta2, bc1 = float(r.bias1), div = r.grad_div;
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t k = 0; k < count; ++k) {
    float *p = u[k].p, *m = u[k].m, *v = u[k].v;
    const float* g = u[k].g;
    double uu = 0, pp = 0;
    for (int64_t i = 0; i < u[k].n; ++i) {
      const float gi = g[i] / div;
      m[i] = m[i] + (1.f - b1) * (gi - m[i]);  // torch's lerp_(grad, 1 - b1)
      v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
      const float d = lamb_update(m[i], v[i], p[i], u[k].wd, bc1, r);
      uu += double(d) * d;
      pp += double(p[i]) * p[i];
    }
    update_sq[k] = uu, weight_sq[k] = pp;
  }
}

void lamb_apply(const ParamUpdate* u, int64_t count, const UpdateRule& r, const float* ratio, int nt) {
  const float bc1 = float(r.bias1);
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t k = 0; k < count; ++k) {
    float* p = u[k].p;
    const float *m = u[k].m, *v = u[k].v;
    const float step = u[k].lr * ratio[k];
    for (int64_t i = 0; i < u[k].n; ++i) p[i] -= step * lamb_update(m[i], v[i], p[i], u[k].wd, bc1, r);
  }
}

void sums_of_squares(double* out, const Span* x, int64_t count, int nt) {
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t c = 0; c < count; ++c) {
    const float* v = x[c].data;
    double acc = 0;
    for (int64_t i = 0; i < x[c].n; ++i) acc += double(v[i]) * v[i];
    out[c] = acc;
  }
}

void scale_spans(const Span* x, int64_t count, float scale, int nt) {
#pragma omp parallel num_threads(nt)
  for (int64_t k = 0; k < count; ++k) {
    float* g = x[k].data;
    const int64_t n = x[k].n;
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) g[i] *= scale;
  }
}

void scale_each_span(const Span* x, const float* scales, int64_t count, int nt) {
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t k = 0; k < count; ++k) {
    float* g = x[k].data;
    for (int64_t i = 0; i < x[k].n; ++i) g[i] *= scales[k];
  }
}

void clamp_spans(const Span* x, int64_t count, float limit, int nt) {
#pragma omp parallel num_threads(nt)
  for (int64_t k = 0; k < count; ++k) {
    float* g = x[k].data;
    const int64_t n = x[k].n;
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) g[i] = g[i] < -limit ? -limit : limit < g[i] ? limit : g[i];  // NaN stays
  }
}

}  // namespace vit::cpu
