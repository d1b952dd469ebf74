// Attention's row softmax and its backward per instruction set (attention.cpp dispatches to
// them; cpu.h documents softmax_rows and softmax_backward_rows). One thread each.
#pragma once
#include <cstdint>

namespace vit::cpu {

// The kernels every path has, declared once and expanded in each path's namespace.
// warm_rows reads p[0, n) in order, so that a sample's strided heads find its rows in cache
// (attention.cpp's warm_samples).
#define VIT_SOFTMAX_KERNELS                                                       \
  void softmax_rows(float* P, int64_t rows, int64_t n, const uint8_t* km);        \
  void softmax_backward_rows(float* dP, const float* P, int64_t rows, int64_t n); \
  void exp_nonpos(float* y, const float* x, int64_t n);                           \
  void warm_rows(const float* p, int64_t n);

namespace avx512 {
VIT_SOFTMAX_KERNELS
}  // namespace avx512

namespace avx2 {
VIT_SOFTMAX_KERNELS
}  // namespace avx2

namespace neon {
VIT_SOFTMAX_KERNELS
}  // namespace neon

#undef VIT_SOFTMAX_KERNELS

}  // namespace vit::cpu
