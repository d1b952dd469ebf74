// Rounding to bf16 in AVX2 vectors for linear_bf16.cpp's round_to_bf16 (avx512/linear_bf16.cpp
// in 8 lanes). Declared in kernels.h.
#include <cstring>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"

namespace vit::cpu::avx2 {

namespace {
// The 8 floats of v rounded to bf16 (nearest even; NaN stays a quiet NaN, subnormals are
// kept), in the low 16 bits of each 32-bit lane: the scalar to_bf16's bits (linear_bf16.cpp).
VIT_AVX2 inline __m256i bf16_lanes(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  // |u| > inf as integers is NaN; both sides are below 2^31, so the signed compare serves.
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i hi = _mm256_srli_epi32(u, 16);
  const __m256i even =
      _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, even), 16);
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

// 16 rounded values from the 16 floats at a and b (8 each): packus interleaves the two
// vectors' 128-bit halves (every lane is below 2^16, so nothing saturates); the permute
// puts them back in order.
VIT_AVX2 inline __m256i bf16_16(__m256 a, __m256 b) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_lanes(a), bf16_lanes(b)), 0xD8);
}
}  // namespace

// In mixed-precision training the products' inputs and output gradients pass through here.
VIT_AVX2 void round_to_bf16(uint16_t* dst, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        bf16_16(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8)));
  if (i < n) {  // a tail of 1-15: masked loads, then only its values stored
    alignas(32) uint16_t tail[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail),
                       bf16_16(load(x + i, n - i), load(x + i + 8, n - i - 8)));
    std::memcpy(dst + i, tail, size_t(n - i) * sizeof(uint16_t));
  }
}

}  // namespace vit::cpu::avx2
