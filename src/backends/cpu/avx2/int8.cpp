// A row's quantization on AVX2 (8 lanes; the tail through a zero-padded vector; vcvtps2dq
// rounds to nearest even as the generic loop does), and the int8 product on AVX2, in two variants over one
// register tile of 4 rows x 16 channels (two 8-lane halves of a block, 8 accumulators):
//   gemm_s8       plain AVX2: vpmaddubsw multiplies |a| (u8) by w with a's sign moved onto it
//                 (vpsignb) and adds pairs into int16, vpmaddwd adds those pairs into int32.
//                 With a and w in [-127, 127] a pair is at most 2 * 127 * 127 = 32258, below
//                 int16's 32767: it never saturates (int8.h), so C is exact.
//   gemm_s8_vnni  AVX-VNNI (Alder Lake, Zen 5 without AVX-512 in use): vpdpbusd on ymm, with
//                 avx512/gemm_s8.cpp's a + 128 and its correction.
#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"

#define VIT_AVX2 __attribute__((target("avx2,fma")))
#define VIT_AVX_VNNI __attribute__((target("avx2,fma,avxvnni")))

namespace vit::cpu::avx2 {

namespace {
constexpr int kMR = 4;

inline int32_t four(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// acc += the four u8 x s8 products of each lane of a and w (AVX-VNNI's vpdpbusd, VEX form). In
// inline assembly, as avx512/gemm_s8.cpp's: GCC 12 keeps the intrinsic's accumulators in memory.
VIT_AVX_VNNI inline __m256i dpbusd(__m256i acc, __m256i a, __m256i w) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(w));
  return acc;
}

// acc[r][h] += the products of row r's four bytes at k with the block's channels 8h..8h+7.
template <int MR>
VIT_AVX2 void tile_plain(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, const int8_t* W, int64_t Kp) {
  __m256i acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t k = 0; k < Kp; k += kS8Group) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(W + k * kS8Block));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(W + k * kS8Block + 32));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i a = _mm256_set1_epi32(four(A + r * lda + k));
      const __m256i abs_a = _mm256_sign_epi8(a, a);
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(w0, a)), ones);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(w1, a)), ones);
      acc[r][0] = _mm256_add_epi32(acc[r][0], p0);
      acc[r][1] = _mm256_add_epi32(acc[r][1], p1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(C + r * ldc), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(C + r * ldc + 8), acc[r][1]);
  }
}

template <int MR>
VIT_AVX_VNNI void tile_vnni(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, const int8_t* W,
                            const int32_t* wsum, int64_t Kp) {
  __m256i acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  for (int64_t k = 0; k < Kp; k += kS8Group) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(W + k * kS8Block));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(W + k * kS8Block + 32));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i a = _mm256_xor_si256(_mm256_set1_epi32(four(A + r * lda + k)), flip);
      acc[r][0] = dpbusd(acc[r][0], a, w0);
      acc[r][1] = dpbusd(acc[r][1], a, w1);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {
    const __m256i off =
        _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsum + 8 * h)), 7);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(C + r * ldc + 8 * h), _mm256_sub_epi32(acc[r][h], off));
  }
}

// Every block, rows in tiles of kMR and a last tile of the rest: tile(MR tag, C, A, W, wsum).
template <typename Tile>
void blocks(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
            const int32_t* wsum, int64_t nb, int64_t Kp, Tile&& tile) {
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* Wb = W + b * Kp * kS8Block;
    int32_t* Cb = C + b * kS8Block;
    int64_t m = 0;
    for (; m + kMR <= M; m += kMR)
      tile(std::integral_constant<int, kMR>{}, Cb + m * ldc, A + m * lda, Wb, wsum + b * kS8Block);
    switch (M - m) {
      case 1:
        tile(std::integral_constant<int, 1>{}, Cb + m * ldc, A + m * lda, Wb, wsum + b * kS8Block);
        break;
      case 2:
        tile(std::integral_constant<int, 2>{}, Cb + m * ldc, A + m * lda, Wb, wsum + b * kS8Block);
        break;
      case 3:
        tile(std::integral_constant<int, 3>{}, Cb + m * ldc, A + m * lda, Wb, wsum + b * kS8Block);
        break;
      default: break;
    }
  }
}
}  // namespace

namespace {
// The 8 floats at x + i, zeros past K.
VIT_AVX2 inline __m256 load8(const float* x, int64_t i, int64_t K) {
  if (K - i >= 8) return _mm256_loadu_ps(x + i);
  alignas(32) float t[8] = {};
  if (K > i) std::memcpy(t, x + i, sizeof(float) * size_t(K - i));
  return _mm256_load_ps(t);
}
}  // namespace

VIT_AVX2 float quantize_row_s8(int8_t* q, const float* x, int64_t K, int64_t ldq) {
  const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.f);
  __m256 amax = zero, bad = zero;
  for (int64_t i = 0; i < K; i += 8) {
    const __m256 v = load8(x, i, K);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
    bad = _mm256_add_ps(bad, _mm256_mul_ps(v, zero));
  }
  alignas(32) float a[8], b[8];
  _mm256_store_ps(a, amax);
  _mm256_store_ps(b, bad);
  float m = 0.f, s = 0.f;
  for (int l = 0; l < 8; ++l) m = std::max(m, a[l]), s += b[l];
  const float scale = s == 0.f ? m / 127.f : std::nanf("");
  if (!(scale > 0.f)) {  // zeros, a NaN or an infinity: q is 0
    std::memset(q, 0, size_t(ldq));
    return scale;
  }
  const __m256 inv = _mm256_set1_ps(1.f / scale);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  for (int64_t i = 0; i < ldq; i += 8) {
    const __m256i r =
        _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(load8(x, i, K), inv)), lo), hi);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    const int64_t bytes = _mm_cvtsi128_si64(_mm_packs_epi16(w, w));
    std::memcpy(q + i, &bytes, size_t(std::min<int64_t>(8, ldq - i)));
  }
  return scale;
}

VIT_AVX2 void dequant_s8(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx,
                         const float* sw, const float* b, int64_t rows, int64_t cols) {
  const int64_t full = cols / 8 * 8;
  for (int64_t i = 0; i < rows; ++i) {
    const __m256 s = _mm256_set1_ps(sx[i]);
    for (int64_t j = 0; j < full; j += 8) {
      const __m256 c =
          _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(C + i * ldc + j)));
      const __m256 scale = _mm256_mul_ps(s, _mm256_loadu_ps(sw + j));
      const __m256 bias = b ? _mm256_loadu_ps(b + j) : _mm256_setzero_ps();
      _mm256_storeu_ps(y + i * ldy + j, _mm256_add_ps(_mm256_mul_ps(c, scale), bias));
    }
    // The tail as the generic loop writes it (this file is compiled without contraction).
    for (int64_t j = full; j < cols; ++j)
      y[i * ldy + j] = float(C[i * ldc + j]) * (sx[i] * sw[j]) + (b ? b[j] : 0.f);
  }
}

void gemm_s8(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
             const int32_t* wsum, int64_t nb, int64_t Kp) {
  blocks(C, ldc, A, lda, M, W, wsum, nb, Kp,
         [&](auto mr, int32_t* c, const int8_t* a, const int8_t* w, const int32_t*) {
           tile_plain<decltype(mr)::value>(c, ldc, a, lda, w, Kp);
         });
}

void gemm_s8_vnni(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                  const int32_t* wsum, int64_t nb, int64_t Kp) {
  blocks(C, ldc, A, lda, M, W, wsum, nb, Kp,
         [&](auto mr, int32_t* c, const int8_t* a, const int8_t* w, const int32_t* s) {
           tile_vnni<decltype(mr)::value>(c, ldc, a, lda, w, s, Kp);
         });
}

bool has_avx_vnni() {
  // CPUID leaf 7, sub-leaf 1, EAX bit 4 (clang 14's __builtin_cpu_supports has no "avxvnni").
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1u);
}

}  // namespace vit::cpu::avx2
