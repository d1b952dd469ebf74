// The attention backward of one narrow head (D <= 8, T <= 64: mnist-seed's D = 4, T = 50)
// in one pass over the query rows, keys along the vector lanes: avx2/attention_narrow.cpp's
// kernel in NEON's 4 lanes and 32 registers, one query row at a time (see there for the
// steps). For each query row i:
//   dP = dO_i v^T and dS = P_i (dP - sum_j P_i dP) in registers (NV vectors of keys; at
//   T = 64, P_i and dS take all 32 and the compiler keeps some in L1),
//   dv^T += dO_i^T P_i and dk^T += q_i^T dS: [D, T] accumulators in L1, in row order,
//   dq_i = scale dS k: D dot products over keys, reduced across lanes 4 at a time (pairwise adds).
// Sums over query rows (dv, dk) run in row order as in the general path's products; dS's row
// sums and dq's sums over keys are reduced across lanes in another order, so dq and dk
// differ from it in the last bits (tests: against plain loops in double).
// Declared in narrow.h; attention.cpp calls it where isa() is neon.
#include <utility>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
constexpr int kMaxD = 8, kMaxNV = 16;

// The sums over the lanes of x0..x3, in that order, as one vector.
inline float32x4_t hsum4(float32x4_t x0, float32x4_t x1, float32x4_t x2, float32x4_t x3) {
  return vpaddq_f32(vpaddq_f32(x0, x1), vpaddq_f32(x2, x3));
}

template <int D, int NV>
void backward_head(float* dq, float* dk, float* dv, const float* q, const float* k, const float* v,
                   int64_t ld, const float* dO, int64_t ldo, const float* P, int64_t T, float scale) {
  constexpr int L = 4 * NV, DG = (D + 3) / 4 * 4;
  thread_local Scratch<float> scratch;  // vT, kT, dvT, dkT, each [D, L], zero past T
  float* vT = grown(scratch, 4 * D * L);
  float* kT = vT + D * L;
  float* dvT = kT + D * L;
  float* dkT = dvT + D * L;
  const float32x4_t zero = vdupq_n_f32(0.f);
  for (int64_t i = 0; i < 4 * D * L; i += 4) vst1q_f32(vT + i, zero);
  head_transpose(vT, L, v, ld, T, D);
  head_transpose(kT, L, k, ld, T, D);
  const int64_t last = T - 4 * (NV - 1);  // the keys of the last vector
  for (int64_t i = 0; i < T; ++i) {
    const float* o = dO + i * ldo;
    const float* p = P + i * T;
    float32x4_t pu[NV], c[NV];
#pragma GCC unroll 16
    for (int u = 0; u < NV; ++u) {
      pu[u] = u + 1 < NV ? vld1q_f32(p + 4 * u) : load(p + 4 * u, last);
      c[u] = zero;
    }
    // dP = dO_i v^T (zero past T, where vT is).
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      const float od = o[d];
#pragma GCC unroll 16
      for (int u = 0; u < NV; ++u) c[u] = vfmaq_n_f32(c[u], vld1q_f32(vT + d * L + 4 * u), od);
    }
    // dS = P (dP - sum_j P dP), as softmax_backward_rows computes it.
    float32x4_t dot = vmulq_f32(pu[0], c[0]);
#pragma GCC unroll 16
    for (int u = 1; u < NV; ++u) dot = vfmaq_f32(dot, pu[u], c[u]);
    const float32x4_t vdot = vdupq_n_f32(hsum(dot));
#pragma GCC unroll 16
    for (int u = 0; u < NV; ++u) c[u] = vmulq_f32(pu[u], vsubq_f32(c[u], vdot));
      // dv^T += dO_i^T P_i and dk^T += q_i^T dS, in row order.
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      const float od = o[d], qd = q[i * ld + d];
#pragma GCC unroll 16
      for (int u = 0; u < NV; ++u) {
        float* av = dvT + d * L + 4 * u;
        float* ak = dkT + d * L + 4 * u;
        vst1q_f32(av, vfmaq_n_f32(vld1q_f32(av), pu[u], od));
        vst1q_f32(ak, vfmaq_n_f32(vld1q_f32(ak), c[u], qd));
      }
    }
    // dq_i = scale dS k, 4 dimensions per reduction.
    float sums[DG];
#pragma GCC unroll 2
    for (int g = 0; g < DG; g += 4) {
      float32x4_t x[4];
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        x[m] = zero;
        if (g + m < D)
#pragma GCC unroll 16
          for (int u = 0; u < NV; ++u) x[m] = vfmaq_f32(x[m], c[u], vld1q_f32(kT + (g + m) * L + 4 * u));
      }
      vst1q_f32(sums + g, vmulq_n_f32(hsum4(x[0], x[1], x[2], x[3]), scale));
    }
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) dq[i * ld + d] = sums[d];
  }
  // dk = scale (dk^T)^T, dv = (dv^T)^T.
  for (int64_t i = 0; i < D * L; i += 4) vst1q_f32(dkT + i, vmulq_n_f32(vld1q_f32(dkT + i), scale));
  head_transpose(dk, ld, dkT, L, D, T);
  head_transpose(dv, ld, dvT, L, D, T);
}

}  // namespace

VIT_NARROW_BACKWARD_ENTRIES(4)

}  // namespace vit::cpu::neon
