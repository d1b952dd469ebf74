// The attention backward of one narrow head (D <= 8, T <= 64: mnist-seed's D = 4, T = 50)
// in one pass over the query rows, keys along the vector lanes: avx512/attention_narrow.cpp's
// idea in AVX2's 8 lanes and 16 registers, one query row at a time. The general path
// (attention.cpp) makes dS and then runs three T x D x T products, each with a transposed
// copy of its input or output; here, for each query row i:
//   dP = dO_i v^T and dS = P_i (dP - sum_j P_i dP) in registers (NV vectors of keys),
//   dv^T += dO_i^T P_i and dk^T += q_i^T dS: [D, T] accumulators in L1, in row order,
//   dq_i = scale dS k: D dot products over keys, reduced across lanes 4 at a time (hadd).
// Sums over query rows (dv, dk) run in row order as in the general path's products; dS's row
// sums and dq's sums over keys are reduced across lanes in another order, so dq and dk
// differ from it in the last bits (tests: against plain loops in double).
// Declared in kernels.h; attention.cpp calls it where isa() is avx2.
#include <utility>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_table.h"

namespace vit::cpu::avx2 {

namespace {
constexpr int kMaxD = 8, kMaxNV = 8;

// The sums over the lanes of x0..x3, in that order, as one 4-float vector.
VIT_AVX2 inline __m128 hsum4(__m256 x0, __m256 x1, __m256 x2, __m256 x3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(x0, x1), _mm256_hadd_ps(x2, x3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <int D, int NV>
VIT_AVX2 void backward_head(float* dq, float* dk, float* dv, const float* q, const float* k, const float* v,
                            int64_t ld, const float* dO, int64_t ldo, const float* P, int64_t T,
                            float scale) {
  constexpr int L = 8 * NV, DG = (D + 3) / 4 * 4;
  thread_local Scratch<float> scratch;  // vT, kT, dvT, dkT, each [D, L], zero past T
  float* vT = grown(scratch, 4 * D * L);
  float* kT = vT + D * L;
  float* dvT = kT + D * L;
  float* dkT = dvT + D * L;
  for (int64_t i = 0; i < 4 * D * L; i += 8) _mm256_storeu_ps(vT + i, _mm256_setzero_ps());
  head_transpose(vT, L, v, ld, T, D);
  head_transpose(kT, L, k, ld, T, D);
  const __m256i last = tail_mask(T - 8 * (NV - 1));  // the keys of the last vector
  for (int64_t i = 0; i < T; ++i) {
    const float* o = dO + i * ldo;
    const float* p = P + i * T;
    __m256 pu[NV], c[NV];
#pragma GCC unroll 16
    for (int u = 0; u < NV; ++u) {
      pu[u] = u + 1 < NV ? _mm256_loadu_ps(p + 8 * u) : _mm256_maskload_ps(p + 8 * u, last);
      c[u] = _mm256_setzero_ps();
    }
    // dP = dO_i v^T (zero past T, where vT is).
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      const __m256 od = _mm256_set1_ps(o[d]);
#pragma GCC unroll 16
      for (int u = 0; u < NV; ++u) c[u] = _mm256_fmadd_ps(od, _mm256_loadu_ps(vT + d * L + 8 * u), c[u]);
    }
    // dS = P (dP - sum_j P dP), as softmax_backward_rows computes it.
    __m256 dot = _mm256_mul_ps(pu[0], c[0]);
#pragma GCC unroll 16
    for (int u = 1; u < NV; ++u) dot = _mm256_fmadd_ps(pu[u], c[u], dot);
    const __m256 vdot = _mm256_set1_ps(hsum(dot));
#pragma GCC unroll 16
    for (int u = 0; u < NV; ++u) c[u] = _mm256_mul_ps(pu[u], _mm256_sub_ps(c[u], vdot));
      // dv^T += dO_i^T P_i and dk^T += q_i^T dS, in row order.
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      const __m256 od = _mm256_set1_ps(o[d]), qd = _mm256_set1_ps(q[i * ld + d]);
#pragma GCC unroll 16
      for (int u = 0; u < NV; ++u) {
        float* av = dvT + d * L + 8 * u;
        float* ak = dkT + d * L + 8 * u;
        _mm256_storeu_ps(av, _mm256_fmadd_ps(od, pu[u], _mm256_loadu_ps(av)));
        _mm256_storeu_ps(ak, _mm256_fmadd_ps(qd, c[u], _mm256_loadu_ps(ak)));
      }
    }
    // dq_i = scale dS k, 4 dimensions per reduction.
    alignas(32) float sums[DG];
#pragma GCC unroll 2
    for (int g = 0; g < DG; g += 4) {
      __m256 x[4];
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        x[m] = _mm256_setzero_ps();
        if (g + m < D)
#pragma GCC unroll 16
          for (int u = 0; u < NV; ++u)
            x[m] = _mm256_fmadd_ps(c[u], _mm256_loadu_ps(kT + (g + m) * L + 8 * u), x[m]);
      }
      _mm_store_ps(sums + g, _mm_mul_ps(hsum4(x[0], x[1], x[2], x[3]), _mm_set1_ps(scale)));
    }
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) dq[i * ld + d] = sums[d];
  }
  // dk = scale (dk^T)^T, dv = (dv^T)^T.
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t i = 0; i < D * L; i += 8)
    _mm256_storeu_ps(dkT + i, _mm256_mul_ps(_mm256_loadu_ps(dkT + i), vs));
  head_transpose(dk, ld, dkT, L, D, T);
  head_transpose(dv, ld, dvT, L, D, T);
}

}  // namespace

VIT_NARROW_BACKWARD_ENTRIES(8)

}  // namespace vit::cpu::avx2
