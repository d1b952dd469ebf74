// LayerNorm's kernels per instruction set (layernorm.cpp dispatches to them and splits the
// threads): each works on the rows or columns it is given, on the calling thread.
//   layernorm_rows:      layernorm_forward's rows [i0, i1) (cpu.h)
//   layernorm_dx_rows:   rows [i0, i1) of the backward's dx (assigned, or added when accumulate_dx)
//   param_grads_columns: columns [j0, j1) of dw += sum_i dy (x - mean) rstd and db += sum_i dy,
//                        every column summed over the rows in order (any thread count, same bits)
#pragma once
#include <cstdint>

namespace vit::cpu {

// The kernels every path has, declared once and expanded in each path's namespace.
#define VIT_LAYERNORM_KERNELS                                                                              \
  void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,  \
                      int64_t i0, int64_t i1, int64_t C, float eps);                                       \
  void layernorm_dx_rows(float* dx, const float* dy, const float* x, const float* mean, const float* rstd, \
                         const float* w, int64_t i0, int64_t i1, int64_t C, bool accumulate_dx);           \
  void param_grads_columns(float* dw, float* db, const float* dy, const float* x, const float* mean,       \
                           const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1);

namespace avx512 {
VIT_LAYERNORM_KERNELS
// The whole backward on one thread in one walk over the rows (dx, the parameter gradients and
// dxsum's column sums: the same bits as the passes above and colsum_add), for the shapes
// one_pass_backward_fits; one read of dy and x instead of three.
bool one_pass_backward_fits(int64_t C);
void layernorm_backward_one_pass(float* dx, float* dw, float* db, float* dxsum, const float* dy,
                                 const float* x, const float* mean, const float* rstd, const float* w,
                                 int64_t M, int64_t C, bool accumulate_dx);
}  // namespace avx512

namespace avx2 {
VIT_LAYERNORM_KERNELS
}  // namespace avx2

namespace neon {
VIT_LAYERNORM_KERNELS
}  // namespace neon

#undef VIT_LAYERNORM_KERNELS

}  // namespace vit::cpu
