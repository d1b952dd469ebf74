// The attention forward for narrow heads (D <= 8, mnist-seed's D = 4) with 16 samples along
// the vector lanes. Per head, the usual kernels put keys (or D) along the lanes: at T = 50
// and D = 4 a row of scores fills 50 of 64 lanes, every row pays two horizontal reductions,
// and P v needs P transposed. Here lane l of every vector belongs to sample b0 + l: a
// score, its softmax and the product with v are vertical operations on 16 samples at once,
// with no reduction across lanes and no padding; only qkv, out and the probabilities (when
// kept) move between layouts (head_transpose). The backward stays per head (attention.cpp):
// lanes versions of it, with dk and dv accumulated in memory across queries or in two
// passes (queries, then keys, each accumulating in registers, dS and P kept key-major
// between them), were slower (docs/design.md, "Matrix products: oneDNN on x86-64, OpenBLAS
// on aarch64").
//
// Within this kernel a sample's result does not depend on the other samples of its group
// (lanes are independent; missing samples of a partial group are zeros and not stored).
// Whether a sample comes here at all depends on the call's sample count (attention.cpp:
// a last group of fewer than 12 goes per head). Sums over keys run in key order.
// Declared in kernels.h; attention.cpp calls it where isa() is avx512.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/cpu.h"

namespace vit::cpu::avx512 {

namespace {
constexpr int64_t kMaxD = 8;

// X[c][t][16] = src[b0 + l][t][c] for the n <= 16 samples of a group (lanes past n: 0), for
// src[B][T][W]; and the way back for the n valid lanes. Column-major, so that a head's
// dimension d of every token is one contiguous stream (token-major rows of 3C vectors put a
// head's k and v 1.5 KiB apart per token, which mapped them onto few L1 sets;
// docs/history/benchmarks-2026-11.md, "Session of 2026-11-24 (evening): the narrow models'
// kernels").
void to_lanes(float* X, const float* src, int64_t n, int64_t T, int64_t W) {
  if (n < 16)
    for (int64_t i = 0; i < W * T * 16; ++i) X[i] = 0.f;
  for (int64_t t = 0; t < T; ++t) head_transpose(X + t * 16, T * 16, src + t * W, T * W, n, W);
}
void from_lanes(float* dst, const float* X, int64_t n, int64_t T, int64_t W) {
  for (int64_t t = 0; t < T; ++t) head_transpose(dst + t * W, T * W, X + t * 16, T * 16, W, n);
}

// The 16 samples' mask of key j: lane l set when sample b0 + l attends to it.
VIT_AVX512 void key_lanes(__mmask16* km16, const uint8_t* km, int64_t n, int64_t T) {
  for (int64_t j = 0; j < T; ++j) {
    unsigned m = 0;
    for (int64_t l = 0; l < n; ++l) m |= (km ? km[l * T + j] != 0 : 1u) << l;
    km16[j] = __mmask16(m);
  }
}
}  // namespace

bool attention_lanes_fit(int64_t T, int64_t C, int64_t H) {
  return C / H <= kMaxD && T <= 1024;
}

namespace {
// Head h of a group in lanes: X [T][3C][16] (q | k | v), O [T][C][16], S [T][16] scratch
// for a row of scores, km [T] the samples' key masks; P (when kept) at the group's first
// sample. D is a template parameter so that the loops over d unroll with no tests.
template <int D>
VIT_AVX512 void head_lanes(float* O, float* probs, const float* X, float* S, const __mmask16* km, int64_t h,
                           int64_t n, int64_t T, int64_t C, int64_t H) {
  const __m512 scale = _mm512_set1_ps(1.f / std::sqrt(float(D)));
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const float* K = X + (C + h * D) * T * 16;  // K + (d T + j) 16: key j, dim d
  const float* V = X + (2 * C + h * D) * T * 16;
  for (int64_t i = 0; i < T; ++i) {
    __m512 q[D], acc[D];
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      q[d] = _mm512_mul_ps(_mm512_loadu_ps(X + ((h * D + d) * T + i) * 16), scale);
      acc[d] = _mm512_setzero_ps();
    }
    // Scores and their max; masked keys are -inf.
    __m512 mx = ninf;
    for (int64_t j = 0; j < T; ++j) {
      const float* k = K + j * 16;
      __m512 s = _mm512_mul_ps(q[0], _mm512_loadu_ps(k));
#pragma GCC unroll 8
      for (int d = 1; d < D; ++d) s = _mm512_fmadd_ps(q[d], _mm512_loadu_ps(k + d * T * 16), s);
      s = _mm512_mask_mov_ps(ninf, km[j], s);
      _mm512_storeu_ps(S + j * 16, s);
      mx = _mm512_max_ps(mx, s);
    }
    // exp, its sum, and P v unnormalized; a sample with every key masked subtracts 0 (its
    // exps are all 0) and gets 0 probabilities and output.
    mx = _mm512_mask_mov_ps(mx, _mm512_cmp_ps_mask(mx, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < T; ++j) {
      const __m512 e = simd::exp512_nonpos(_mm512_sub_ps(_mm512_loadu_ps(S + j * 16), mx));
      sum = _mm512_add_ps(sum, e);
      _mm512_storeu_ps(S + j * 16, e);
      const float* v = V + j * 16;
#pragma GCC unroll 8
      for (int d = 0; d < D; ++d) acc[d] = _mm512_fmadd_ps(e, _mm512_loadu_ps(v + d * T * 16), acc[d]);
    }
    const __m512 inv = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(sum, _mm512_setzero_ps(), _CMP_GT_OQ),
                                           _mm512_set1_ps(1.f), sum);
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) _mm512_storeu_ps(O + ((h * D + d) * T + i) * 16, _mm512_mul_ps(acc[d], inv));
    if (probs) {  // row i of every sample's P: scaled, then back to [sample][key]
      for (int64_t j = 0; j < T; ++j)
        _mm512_storeu_ps(S + j * 16, _mm512_mul_ps(_mm512_loadu_ps(S + j * 16), inv));
      head_transpose(probs + (h * T + i) * T, H * T * T, S, 16, T, n);
    }
  }
}
}  // namespace

// One group of n <= 16 samples starting at qkv's sample 0: out and probs at theirs.
void attention_forward_lanes(float* out, float* probs, const float* qkv, const uint8_t* key_mask, int64_t n,
                             int64_t T, int64_t C, int64_t H) {
  const int64_t D = C / H, W = 3 * C;
  thread_local Scratch<float> xs, os, ss;
  thread_local Scratch<__mmask16> ks;
  float* X = grown(xs, T * W * 16);  // per-thread scratch: [rows][16] floats
  float* O = grown(os, T * C * 16);
  float* S = grown(ss, T * 16);
  __mmask16* km = grown(ks, T);
  to_lanes(X, qkv, n, T, W);
  key_lanes(km, key_mask, n, T);
  using Head = void (*)(float*, float*, const float*, float*, const __mmask16*, int64_t, int64_t, int64_t,
                        int64_t, int64_t);
  static constexpr Head kHeads[kMaxD] = {head_lanes<1>, head_lanes<2>, head_lanes<3>, head_lanes<4>,
                                         head_lanes<5>, head_lanes<6>, head_lanes<7>, head_lanes<8>};
  for (int64_t h = 0; h < H; ++h) kHeads[D - 1](O, probs, X, S, km, h, n, T, C, H);
  from_lanes(out, O, n, T, C);
}

}  // namespace vit::cpu::avx512
