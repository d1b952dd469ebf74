// The attention forward for narrow heads (D <= 8, mnist-seed's D = 4) with 4 samples along
// the vector lanes: avx2/attention_lanes.cpp's design in NEON's 4 lanes (see
// avx512/attention_lanes.cpp for why). Lane l of every vector belongs to sample b0 + l, so a
// score, its softmax and the product with v are vertical operations on 4 samples at once,
// with no reduction across lanes and no padding of the keys; only qkv, out and the
// probabilities (when kept) move between layouts (head_transpose). A key's mask over the 4
// samples is a vector of all-ones lanes, applied with a bit select. At D = 8, q and the
// output's accumulators take 16 of the 32 registers.
//
// Within this kernel a sample's result does not depend on the other samples of its group
// (lanes are independent; missing samples of a partial group are zeros and not stored).
// Whether a sample comes here at all depends on the call's sample count (attention.cpp).
// Sums over keys run in key order.
// Declared in narrow.h; attention.cpp calls it where isa() is neon.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu.h"
#include "backends/cpu/lanes.h"
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/neon/simd.h"

namespace vit::cpu::neon {

namespace {
using lanes::kMaxD;
constexpr int64_t kLanes = 4;

// Head h of a group in lanes: X [3C][T][4] (q | k | v), O [C][T][4], S [T][4] scratch for a
// row of scores, km4 [T][4] the samples' key masks; P (when kept) at the group's first
// sample. D is a template parameter so that the loops over d unroll with no tests.
template <int D>
void head_lanes(float* O, float* probs, const float* X, float* S, const uint32_t* km4, int64_t h, int64_t n,
                int64_t T, int64_t C, int64_t H) {
  const float32x4_t scale = vdupq_n_f32(1.f / std::sqrt(float(D)));
  const float32x4_t ninf = vdupq_n_f32(-std::numeric_limits<float>::infinity()), zero = vdupq_n_f32(0.f);
  const float* K = X + (C + h * D) * T * kLanes;  // K + (d T + j) 4: key j, dim d
  const float* V = X + (2 * C + h * D) * T * kLanes;
  for (int64_t i = 0; i < T; ++i) {
    float32x4_t q[D], acc[D];
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      q[d] = vmulq_f32(vld1q_f32(X + ((h * D + d) * T + i) * kLanes), scale);
      acc[d] = zero;
    }
    // Scores and their max; masked keys are -inf.
    float32x4_t mx = ninf;
    for (int64_t j = 0; j < T; ++j) {
      const float* k = K + j * kLanes;
      float32x4_t s = vmulq_f32(q[0], vld1q_f32(k));
#pragma GCC unroll 8
      for (int d = 1; d < D; ++d) s = vfmaq_f32(s, q[d], vld1q_f32(k + d * T * kLanes));
      s = vbslq_f32(vld1q_u32(km4 + j * kLanes), s, ninf);
      vst1q_f32(S + j * kLanes, s);
      mx = vmaxq_f32(mx, s);
    }
    // exp, its sum, and P v unnormalized; a sample with every key masked subtracts 0 (its
    // exps are all 0) and gets 0 probabilities and output.
    mx = vbslq_f32(vceqq_f32(mx, ninf), zero, mx);
    float32x4_t sum = zero;
    for (int64_t j = 0; j < T; ++j) {
      const float32x4_t e = exp_nonpos(vsubq_f32(vld1q_f32(S + j * kLanes), mx));
      sum = vaddq_f32(sum, e);
      vst1q_f32(S + j * kLanes, e);
      const float* v = V + j * kLanes;
#pragma GCC unroll 8
      for (int d = 0; d < D; ++d) acc[d] = vfmaq_f32(acc[d], e, vld1q_f32(v + d * T * kLanes));
    }
    const float32x4_t inv = vbslq_f32(vcgtq_f32(sum, zero), vdivq_f32(vdupq_n_f32(1.f), sum), zero);
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) vst1q_f32(O + ((h * D + d) * T + i) * kLanes, vmulq_f32(acc[d], inv));
    if (probs) {  // row i of every sample's P: scaled, then back to [sample][key]
      for (int64_t j = 0; j < T; ++j) vst1q_f32(S + j * kLanes, vmulq_f32(vld1q_f32(S + j * kLanes), inv));
      head_transpose(probs + (h * T + i) * T, H * T * T, S, kLanes, T, n);
    }
  }
}
}  // namespace

// One group of n <= 4 samples starting at qkv's sample 0: out and probs at theirs.
void attention_forward_lanes(float* out, float* probs, const float* qkv, const uint8_t* key_mask, int64_t n,
                             int64_t T, int64_t C, int64_t H) {
  using Head = void (*)(float*, float*, const float*, float*, const uint32_t*, int64_t, int64_t, int64_t,
                        int64_t, int64_t);
  static constexpr Head kHeads[kMaxD] = {head_lanes<1>, head_lanes<2>, head_lanes<3>, head_lanes<4>,
                                         head_lanes<5>, head_lanes<6>, head_lanes<7>, head_lanes<8>};
  lanes::forward_in_lanes<kLanes, uint32_t, &neon::head_transpose>(kHeads, out, probs, qkv, key_mask, n, T, C,
                                                                   H);
}

bool attention_lanes_fit(int64_t T, int64_t C, int64_t H) {
  return lanes::fits(T, C, H);
}

}  // namespace vit::cpu::neon
