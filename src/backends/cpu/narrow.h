// The SIMD kernels for the tiny models' narrow shapes, per instruction set (gemm.cpp and
// attention.cpp dispatch to them where isa() is avx512, avx2 or neon): products with few output
// columns and a short sum, and attention for heads of at most 8 dimensions. One thread each.
// Same conventions as cpu.h (row-major, PyTorch order).
#pragma once
#include <cstdint>

namespace vit::cpu {

// Declared once and expanded in each path's namespace:
// ---- skinny_gemm.cpp: C[M,N] = alpha A[M,K] B[K,N] + beta C + bias (as head_gemm) for
// N <= 32 and K in {8, 16, 24, 32}, A row-major with leading dim lda; the same bits as the
// path's head_gemm. Returns false, doing nothing, for other shapes.
// ---- attention_narrow.cpp: one head's attention backward for narrow heads (D <= 8, T <= 96
// on AVX-512, 64 on AVX2: attention_backward_narrow_fits) in one pass, no attention dropout (P is the
// probabilities both for dv and for dS; NEON: 64 keys): dq, dk, dv (stride ld, like q, k, v) assigned; dO
// stride ldo; P [T, T].
// ---- attention_lanes.cpp: attention_forward for narrow heads (D <= 8) with a vector's
// width of samples along the lanes (16 on AVX-512, 8 on AVX2, 4 on NEON); attention_forward takes it
// without attention dropout when it fits. One group of n samples (at most the width) per
// call, pointers at the group's first sample.
#define VIT_NARROW_KERNELS                                                                                 \
  bool skinny_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,              \
                   const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc);     \
  bool attention_backward_narrow_fits(int64_t T, int64_t D);                                               \
  void attention_backward_narrow(float* dq, float* dk, float* dv, const float* q, const float* k,          \
                                 const float* v, int64_t ld, const float* dO, int64_t ldo, const float* P, \
                                 int64_t T, int64_t D, float scale);                                       \
  bool attention_lanes_fit(int64_t T, int64_t C, int64_t H);                                               \
  void attention_forward_lanes(float* out, float* probs, const float* qkv, const uint8_t* key_mask,        \
                               int64_t n, int64_t T, int64_t C, int64_t H);

namespace avx512 {
VIT_NARROW_KERNELS
}  // namespace avx512

namespace avx2 {
VIT_NARROW_KERNELS
}  // namespace avx2

namespace neon {
VIT_NARROW_KERNELS
}  // namespace neon

#undef VIT_NARROW_KERNELS

}  // namespace vit::cpu
