// The samples-along-the-lanes layout of the narrow-head attention forward, shared by
// avx2/attention_lanes.cpp (8 lanes) and neon/attention_lanes.cpp (4): a group of n <= L
// samples' qkv moved so that lane l of every vector belongs to sample l, the heads run in
// that layout by the path's own head kernels, and the output moved back. Plain C++ over the
// path's head_transpose (a template argument), so each path compiles it with its own.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu.h"

namespace vit::cpu::lanes {

// Heads up to 8 wide (mnist-seed's 4), up to 1024 tokens: what attention_lanes_fit says.
constexpr int64_t kMaxD = 8;
inline bool fits(int64_t T, int64_t C, int64_t H) {
  return C / H <= kMaxD && T <= 1024;
}

// X[c][t][L] = src[l][t][c] for the n <= L samples of a group (lanes past n: 0), for
// src[n][T][W]; and the way back for the n valid lanes. Column-major, so that a head's
// dimension d of every token is one contiguous stream.
template <int64_t L, auto Transpose>
void to_lanes(float* X, const float* src, int64_t n, int64_t T, int64_t W) {
  if (n < L)
    for (int64_t i = 0; i < W * T * L; ++i) X[i] = 0.f;
  for (int64_t t = 0; t < T; ++t) Transpose(X + t * L, T * L, src + t * W, T * W, n, W);
}
template <int64_t L, auto Transpose>
void from_lanes(float* dst, const float* X, int64_t n, int64_t T, int64_t W) {
  for (int64_t t = 0; t < T; ++t) Transpose(dst + t * W, T * W, X + t * L, T * L, W, n);
}

// The samples' mask of key j as L lanes of all ones (attends) or zeros, at km + L j.
template <int64_t L, typename Mask>
void key_lanes(Mask* km, const uint8_t* mask, int64_t n, int64_t T) {
  for (int64_t j = 0; j < T; ++j)
    for (int64_t l = 0; l < L; ++l)
      km[j * L + l] = l < n && (!mask || mask[l * T + j]) ? Mask(~Mask(0)) : Mask(0);
}

// attention_forward_lanes for one group of n <= L samples: heads[D - 1] runs head h on X
// [3C][T][L] (q | k | v) into O [C][T][L], with S [T][L] scratch for a row of scores and km
// [T][L] the key masks; probs (when kept) at the group's first sample.
template <int64_t L, typename Mask, auto Transpose, typename Head>
void forward_in_lanes(const Head* heads, float* out, float* probs, const float* qkv, const uint8_t* key_mask,
                      int64_t n, int64_t T, int64_t C, int64_t H) {
  const int64_t D = C / H, W = 3 * C;
  thread_local Scratch<float> xs, os, ss;  // per thread, grown once, then reused
  thread_local Scratch<Mask> ks;
  float* X = grown(xs, T * W * L);
  float* O = grown(os, T * C * L);
  float* S = grown(ss, T * L);
  Mask* km = grown(ks, T * L);
  to_lanes<L, Transpose>(X, qkv, n, T, W);
  key_lanes<L>(km, key_mask, n, T);
  for (int64_t h = 0; h < H; ++h) heads[D - 1](O, probs, X, S, km, h, n, T, C, H);
  from_lanes<L, Transpose>(out, O, n, T, C);
}

}  // namespace vit::cpu::lanes
