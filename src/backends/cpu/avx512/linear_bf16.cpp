// Rounding to bf16 in AVX-512 vectors for linear_bf16.cpp's round_to_bf16. Declared in
// kernels.h.
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"

namespace vit::cpu::avx512 {

// to_bf16 on 16 floats at a time (simd::store_bf16: the same bits). In mixed-precision
// training the products' inputs and output gradients pass through here, too much for a
// scalar loop (docs/design.md, "Matrix products: oneDNN on x86-64, OpenBLAS on aarch64").
VIT_AVX512 void round_to_bf16(uint16_t* dst, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : simd::tail_mask(n - i);
    simd::store_bf16(dst + i, m, _mm512_maskz_loadu_ps(m, x + i));
  }
}

}  // namespace vit::cpu::avx512
