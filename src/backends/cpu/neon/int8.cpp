// A row's quantization on NEON (4 lanes; the tail through a zero-padded vector; fcvtns rounds
// to nearest even as the generic loop does), and the int8 product on aarch64, in two variants over one
// register tile of 4 rows x 16 channels (four 4-lane quarters of a block, 16 accumulators):
//   gemm_s8_dot  the dot-product extension (Armv8.2 FEAT_DotProd, detected at run time):
//                sdot sums four s8 x s8 products into each int32 lane.
//   gemm_s8      Advanced SIMD alone: smull widens to int16 products (at most 127 * 127),
//                addp adds pairs (at most 32258, no overflow) and sadalp adds pairs into int32.
// Both are exact (int8.h): the generic loop's bits.
#include <arm_neon.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#define VIT_NEON_DOT __attribute__((target("arch=armv8.2-a+dotprod")))

namespace vit::cpu::neon {

namespace {
constexpr int kMR = 4;

inline int8x16_t broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

// The accumulators of a tile: zeroed, and stored as C's rows.
template <int MR>
inline void zero(int32x4_t (&acc)[MR][4]) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) acc[r][j] = vdupq_n_s32(0);
}
template <int MR>
inline void store(int32_t* C, int64_t ldc, const int32x4_t (&acc)[MR][4]) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) vst1q_s32(C + r * ldc + 4 * j, acc[r][j]);
}
// A block's 16 channels x 4 k values at k, in four quarters.
inline void load_block(int8x16_t (&w)[4], const int8_t* W, int64_t k) {
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j) w[j] = vld1q_s8(W + k * kS8Block + 16 * j);
}

template <int MR>
void tile_plain(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, const int8_t* W, int64_t Kp) {
  int32x4_t acc[MR][4];
  zero(acc);
  for (int64_t k = 0; k < Kp; k += kS8Group) {
    int8x16_t w[4];
    load_block(w, W, k);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const int8x16_t a = broadcast4(A + r * lda + k);
#pragma GCC unroll 8
      for (int j = 0; j < 4; ++j) {
        const int16x8_t lo = vmull_s8(vget_low_s8(w[j]), vget_low_s8(a)), hi = vmull_high_s8(w[j], a);
        acc[r][j] = vpadalq_s16(acc[r][j], vpaddq_s16(lo, hi));
      }
    }
  }
  store(C, ldc, acc);
}

template <int MR>
VIT_NEON_DOT void tile_dot(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, const int8_t* W,
                           int64_t Kp) {
  int32x4_t acc[MR][4];
  zero(acc);
  for (int64_t k = 0; k < Kp; k += kS8Group) {
    int8x16_t w[4];
    load_block(w, W, k);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const int8x16_t a = broadcast4(A + r * lda + k);
#pragma GCC unroll 8
      for (int j = 0; j < 4; ++j) acc[r][j] = vdotq_s32(acc[r][j], w[j], a);
    }
  }
  store(C, ldc, acc);
}

// Every block, rows in tiles of kMR and a last tile of the rest.
template <typename Tile>
void blocks(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W, int64_t nb,
            int64_t Kp, Tile&& tile) {
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* Wb = W + b * Kp * kS8Block;
    int32_t* Cb = C + b * kS8Block;
    int64_t m = 0;
    for (; m + kMR <= M; m += kMR) tile(std::integral_constant<int, kMR>{}, Cb + m * ldc, A + m * lda, Wb);
    switch (M - m) {
      case 1: tile(std::integral_constant<int, 1>{}, Cb + m * ldc, A + m * lda, Wb); break;
      case 2: tile(std::integral_constant<int, 2>{}, Cb + m * ldc, A + m * lda, Wb); break;
      case 3: tile(std::integral_constant<int, 3>{}, Cb + m * ldc, A + m * lda, Wb); break;
      default: break;
    }
  }
}
}  // namespace

float quantize_row_s8(int8_t* q, const float* x, int64_t K, int64_t ldq) {
  // The 4 floats at x + i, zeros past K.
  auto load = [&](int64_t i) {
    if (K - i >= 4) return vld1q_f32(x + i);
    float t[4] = {};
    if (K > i) std::memcpy(t, x + i, sizeof(float) * size_t(K - i));
    return vld1q_f32(t);
  };
  float32x4_t amax = vdupq_n_f32(0.f), bad = vdupq_n_f32(0.f);
  for (int64_t i = 0; i < K; i += 4) {
    const float32x4_t v = load(i);
    amax = vmaxnmq_f32(amax, vabsq_f32(v));
    bad = vaddq_f32(bad, vmulq_n_f32(v, 0.f));
  }
  const float scale = vaddvq_f32(bad) == 0.f ? vmaxvq_f32(amax) / 127.f : std::nanf("");
  if (!(scale > 0.f)) {  // zeros, a NaN or an infinity: q is 0
    std::memset(q, 0, size_t(ldq));
    return scale;
  }
  const float32x4_t inv = vdupq_n_f32(1.f / scale);
  const int32x4_t lo = vdupq_n_s32(-127), hi = vdupq_n_s32(127);
  for (int64_t i = 0; i < ldq; i += 4) {
    const int32x4_t r = vminq_s32(vmaxq_s32(vcvtnq_s32_f32(vmulq_f32(load(i), inv)), lo), hi);
    const int8x8_t b = vmovn_s16(vcombine_s16(vmovn_s32(r), vdup_n_s16(0)));
    int8_t t[8];
    vst1_s8(t, b);
    std::memcpy(q + i, t, size_t(std::min<int64_t>(4, ldq - i)));
  }
  return scale;
}

void gemm_s8(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
             const int32_t*, int64_t nb, int64_t Kp) {
  blocks(C, ldc, A, lda, M, W, nb, Kp, [&](auto mr, int32_t* c, const int8_t* a, const int8_t* w) {
    tile_plain<decltype(mr)::value>(c, ldc, a, lda, w, Kp);
  });
}

void gemm_s8_dot(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                 const int32_t*, int64_t nb, int64_t Kp) {
  blocks(C, ldc, A, lda, M, W, nb, Kp, [&](auto mr, int32_t* c, const int8_t* a, const int8_t* w) {
    tile_dot<decltype(mr)::value>(c, ldc, a, lda, w, Kp);
  });
}

bool has_dotprod() {
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
}

}  // namespace vit::cpu::neon
