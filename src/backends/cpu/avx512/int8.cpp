// A row's quantization on AVX-512 (16 lanes, masked tail; vcvtps2dq rounds to nearest even as
// the generic loop does), and the int8 product on AVX512-VNNI: vpdpbusd sums four u8 x s8 products into each
// of 16 int32 lanes. The s8 activations become u8 by adding 128 (an xor of the sign bit), and 128 times each
// channel's weight sum comes off at the end, so C is exact (int8.h). Register tiles of 6 rows x 64 channels
// (24 accumulators); one 4-byte broadcast of a row feeds four blocks.
#include <cstring>

#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"

#include <cmath>

#define VIT_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

namespace vit::cpu::avx512 {

namespace {
// acc += the four u8 x s8 products of each lane of a and w. In inline assembly: GCC 12 keeps the
// intrinsic's accumulators in memory here, storing all 24 on every step (docs/design.md,
// "int8 inference").
VIT_AVX512_VNNI inline __m512i dpbusd(__m512i acc, __m512i a, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w));
  return acc;
}

template <int MR, int NB>
VIT_AVX512_VNNI void tile(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, const int8_t* W,
                          const int32_t* wsum, int64_t Kp) {
  __m512i acc[MR][NB];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[r][j] = _mm512_setzero_si512();
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const int64_t bs = Kp * kS8Block;
  for (int64_t k = 0; k < Kp; k += kS8Group) {
    __m512i w[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) w[j] = _mm512_loadu_si512(W + j * bs + k * kS8Block);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t a4;
      std::memcpy(&a4, A + r * lda + k, 4);
      const __m512i a = _mm512_xor_si512(_mm512_set1_epi32(a4), flip);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[r][j] = dpbusd(acc[r][j], a, w[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NB; ++j) {
    const __m512i off = _mm512_slli_epi32(_mm512_loadu_si512(wsum + j * kS8Block), 7);  // 128 sum_k w
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
      _mm512_storeu_si512(C + r * ldc + j * kS8Block, _mm512_sub_epi32(acc[r][j], off));
  }
}

constexpr int kMR = 6, kNB = 4;

// Rows in blocks of kMR (then one block of the rest) for NB blocks of channels.
template <int NB>
VIT_AVX512_VNNI void rows(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                          const int32_t* wsum, int64_t Kp) {
  int64_t m = 0;
  for (; m + kMR <= M; m += kMR) tile<kMR, NB>(C + m * ldc, ldc, A + m * lda, lda, W, wsum, Kp);
  switch (M - m) {
    case 1: tile<1, NB>(C + m * ldc, ldc, A + m * lda, lda, W, wsum, Kp); break;
    case 2: tile<2, NB>(C + m * ldc, ldc, A + m * lda, lda, W, wsum, Kp); break;
    case 3: tile<3, NB>(C + m * ldc, ldc, A + m * lda, lda, W, wsum, Kp); break;
    case 4: tile<4, NB>(C + m * ldc, ldc, A + m * lda, lda, W, wsum, Kp); break;
    case 5: tile<5, NB>(C + m * ldc, ldc, A + m * lda, lda, W, wsum, Kp); break;
    default: break;
  }
}
}  // namespace

VIT_AVX512 float quantize_row_s8(int8_t* q, const float* x, int64_t K, int64_t ldq) {
  __m512 amax = _mm512_setzero_ps(), bad = _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < K; i += 16) {
    const __mmask16 m = K - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (K - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
    bad = _mm512_add_ps(bad, _mm512_mul_ps(v, zero));
  }
  const float scale = _mm512_reduce_add_ps(bad) == 0.f ? _mm512_reduce_max_ps(amax) / 127.f : std::nanf("");
  if (!(scale > 0.f)) {  // zeros, a NaN or an infinity: q is 0
    std::memset(q, 0, size_t(ldq));
    return scale;
  }
  const __m512 inv = _mm512_set1_ps(1.f / scale);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t i = 0; i < ldq; i += 16) {
    const __mmask16 m = ldq - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (ldq - i)) - 1);
    const __mmask16 in = K - i >= 16 ? __mmask16(0xffff)
                         : K > i     ? __mmask16((1u << (K - i)) - 1)
                                     : __mmask16(0);
    const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, x + i), inv));
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, _mm512_min_epi32(_mm512_max_epi32(r, lo), hi));
  }
  return scale;
}

VIT_AVX512 void dequant_s8(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx,
                           const float* sw, const float* b, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 s = _mm512_set1_ps(sx[i]);
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = cols - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (cols - j)) - 1);
      const __m512 c = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, C + i * ldc + j));
      const __m512 scale = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, sw + j));
      const __m512 bias = b ? _mm512_maskz_loadu_ps(m, b + j) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(y + i * ldy + j, m, _mm512_add_ps(_mm512_mul_ps(c, scale), bias));
    }
  }
}

void gemm_s8_vnni(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                  const int32_t* wsum, int64_t nb, int64_t Kp) {
  const int64_t bs = Kp * kS8Block;
  int64_t b = 0;
  for (; b + kNB <= nb; b += kNB)
    rows<kNB>(C + b * kS8Block, ldc, A, lda, M, W + b * bs, wsum + b * kS8Block, Kp);
  switch (nb - b) {
    case 1: rows<1>(C + b * kS8Block, ldc, A, lda, M, W + b * bs, wsum + b * kS8Block, Kp); break;
    case 2: rows<2>(C + b * kS8Block, ldc, A, lda, M, W + b * bs, wsum + b * kS8Block, Kp); break;
    case 3: rows<3>(C + b * kS8Block, ldc, A, lda, M, W + b * bs, wsum + b * kS8Block, Kp); break;
    default: break;
  }
}

bool has_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
}

}  // namespace vit::cpu::avx512
