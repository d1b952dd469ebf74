// The attention forward for narrow heads (D <= 8, mnist-seed's D = 4) with 8 samples along
// the vector lanes: avx512/attention_lanes.cpp's design in AVX2's 8 lanes (see there for
// why). Lane l of every vector belongs to sample b0 + l, so a score, its softmax and the
// product with v are vertical operations on 8 samples at once, with no reduction across
// lanes and no padding of the keys; only qkv, out and the probabilities (when kept) move
// between layouts (head_transpose). AVX2 has no mask registers: a key's mask over the 8
// samples is a vector of all-ones lanes, applied with a blend.
//
// Within this kernel a sample's result does not depend on the other samples of its group
// (lanes are independent; missing samples of a partial group are zeros and not stored).
// Whether a sample comes here at all depends on the call's sample count (attention.cpp).
// Sums over keys run in key order.
// Declared in kernels.h; attention.cpp calls it where isa() is avx2.
#include <cmath>
#include <limits>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/lanes.h"

namespace vit::cpu::avx2 {

namespace {
using lanes::kMaxD;
constexpr int64_t kLanes = 8;

// Head h of a group in lanes: X [3C][T][8] (q | k | v), O [C][T][8], S [T][8] scratch for a
// row of scores, km8 [T][8] the samples' key masks; P (when kept) at the group's first
// sample. D is a template parameter so that the loops over d unroll with no tests.
template <int D>
VIT_AVX2 void head_lanes(float* O, float* probs, const float* X, float* S, const int32_t* km8, int64_t h,
                         int64_t n, int64_t T, int64_t C, int64_t H) {
  const __m256 scale = _mm256_set1_ps(1.f / std::sqrt(float(D)));
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const float* K = X + (C + h * D) * T * kLanes;  // K + (d T + j) 8: key j, dim d
  const float* V = X + (2 * C + h * D) * T * kLanes;
  for (int64_t i = 0; i < T; ++i) {
    __m256 q[D], acc[D];
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      q[d] = _mm256_mul_ps(_mm256_loadu_ps(X + ((h * D + d) * T + i) * kLanes), scale);
      acc[d] = _mm256_setzero_ps();
    }
    // Scores and their max; masked keys are -inf.
    __m256 mx = ninf;
    for (int64_t j = 0; j < T; ++j) {
      const float* k = K + j * kLanes;
      __m256 s = _mm256_mul_ps(q[0], _mm256_loadu_ps(k));
#pragma GCC unroll 8
      for (int d = 1; d < D; ++d) s = _mm256_fmadd_ps(q[d], _mm256_loadu_ps(k + d * T * kLanes), s);
      const __m256 m =
          _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(km8 + j * kLanes)));
      s = _mm256_blendv_ps(ninf, s, m);
      _mm256_storeu_ps(S + j * kLanes, s);
      mx = _mm256_max_ps(mx, s);
    }
    // exp, its sum, and P v unnormalized; a sample with every key masked subtracts 0 (its
    // exps are all 0) and gets 0 probabilities and output.
    mx = _mm256_andnot_ps(_mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ), mx);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < T; ++j) {
      const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(S + j * kLanes), mx));
      sum = _mm256_add_ps(sum, e);
      _mm256_storeu_ps(S + j * kLanes, e);
      const float* v = V + j * kLanes;
#pragma GCC unroll 8
      for (int d = 0; d < D; ++d) acc[d] = _mm256_fmadd_ps(e, _mm256_loadu_ps(v + d * T * kLanes), acc[d]);
    }
    const __m256 inv = _mm256_and_ps(_mm256_cmp_ps(sum, _mm256_setzero_ps(), _CMP_GT_OQ),
                                     _mm256_div_ps(_mm256_set1_ps(1.f), sum));
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d)
      _mm256_storeu_ps(O + ((h * D + d) * T + i) * kLanes, _mm256_mul_ps(acc[d], inv));
    if (probs) {  // row i of every sample's P: scaled, then back to [sample][key]
      for (int64_t j = 0; j < T; ++j)
        _mm256_storeu_ps(S + j * kLanes, _mm256_mul_ps(_mm256_loadu_ps(S + j * kLanes), inv));
      head_transpose(probs + (h * T + i) * T, H * T * T, S, kLanes, T, n);
    }
  }
}
}  // namespace

// One group of n <= 8 samples starting at qkv's sample 0: out and probs at theirs.
void attention_forward_lanes(float* out, float* probs, const float* qkv, const uint8_t* key_mask, int64_t n,
                             int64_t T, int64_t C, int64_t H) {
  using Head = void (*)(float*, float*, const float*, float*, const int32_t*, int64_t, int64_t, int64_t,
                        int64_t, int64_t);
  static constexpr Head kHeads[kMaxD] = {head_lanes<1>, head_lanes<2>, head_lanes<3>, head_lanes<4>,
                                         head_lanes<5>, head_lanes<6>, head_lanes<7>, head_lanes<8>};
  lanes::forward_in_lanes<kLanes, int32_t, &avx2::head_transpose>(kHeads, out, probs, qkv, key_mask, n, T, C,
                                                                  H);
}

bool attention_lanes_fit(int64_t T, int64_t C, int64_t H) {
  return lanes::fits(T, C, H);
}

}  // namespace vit::cpu::avx2
