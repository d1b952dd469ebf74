// Exact GELU (nn.GELU(approximate='none')), forward and backward: the plain references over
// whole arrays (generic/gelu.cpp's std::erf loops, on every thread: the tests' yardstick) and
// the kernel table's entries (kernel_set.h: each path's gelu.h kernels, or those loops), whose
// threads are split here: per-thread chunks of whole vectors (elements) or of rows.
#include "backends/cpu/gelu.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "core/threads.h"

namespace vit::cpu {

void gelu_forward_reference(float* y, const float* x, int64_t n) {
  by_vector_chunks(n, [&](int64_t i0, int64_t i1) { gelu_forward_range(y, x, i0, i1); });
}

void gelu_backward_reference(float* dx, const float* dy, const float* x, int64_t n) {
  by_vector_chunks(n, [&](int64_t i0, int64_t i1) { gelu_backward_range(dx, dy, x, i0, i1); });
}

void gelu_forward(float* y, const float* x, int64_t n) {
  const GeluForward f = kernels().gelu_forward;
  by_vector_chunks(n, [&](int64_t i0, int64_t i1) { f(y, x, i0, i1); });
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  const GeluBackward f = kernels().gelu_backward;
  by_vector_chunks(n, [&](int64_t i0, int64_t i1) { f(dx, dy, x, i0, i1); });
}

void bias_gelu_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad) {
  const BiasGeluRows f = kernels().bias_gelu_rows;
  by_row_ranges(M, N, [&](int64_t r0, int64_t r1) { f(y, h, bias, N, r0, r1, keep_grad); });
}

void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad) {
  // The vector paths multiply and sum in one pass, in colsum_add's blocks of columns.
  kernels().bias_gelu_backward(dx, db, dy, grad, M, N, clear_grad);
}

}  // namespace vit::cpu
