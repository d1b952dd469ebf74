// The generic path's kernels: plain loops for the entries every vector path also has
// (path_kernels.h), which run on any CPU and which the tests hold the vector paths to
// (tests/ops/test_kernel_table.cpp), and the whole generic table.
#include <cstring>

#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/linear_packed.h"
#include "backends/cpu/patch_rows.h"

namespace vit::cpu {

void head_gemm_reference(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars,
                         int64_t aks, const float* B, int64_t ldb, float beta, const float* bias, float* C,
                         int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.f;
      for (int64_t k = 0; k < K; ++k) s += A[i * ars + k * aks] * B[k * ldb + j];
      float& c = C[i * ldc + j];
      c = alpha * s + (bias ? bias[j] : 0.f) + (beta == 0.f ? 0.f : beta * c);
    }
}

void colsum_columns_reference(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    float acc = 0.f;
    for (int64_t i = 0; i < M; ++i) acc += dy[i * N + j];
    db[j] += acc;
  }
}

void residual_run_reference(float* out, const float* x, const float* branch, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + s * branch[i];
}

namespace {
// One image row's Gw segments of Pw floats, each to its patch's row (K floats apart).
void memcpy_segments(float* dst, const float* src, int64_t K, int64_t Pw, int64_t Gw) {
  for (int64_t px = 0; px < Gw; ++px) std::memcpy(dst + px * K, src + px * Pw, size_t(Pw) * sizeof(float));
}
}  // namespace

void copy_patch_row(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi, int64_t Wi,
                    int64_t Ph, int64_t Pw, int64_t Gw) {
  patch_rows::copy_row_of_patches<memcpy_segments>(out, x, b, py, C, Hi, Wi, Ph, Pw, Gw);
}

namespace generic {
void fill_kernels(CpuKernels& k) {
  k.head_gemm = head_gemm_reference;
  k.head_transpose = transpose;
  k.colsum_columns = colsum_columns_reference;
  k.round_to_bf16 = round_to_bf16_reference;
  k.residual_run = residual_run_reference;
  k.copy_patch_row_short = copy_patch_row;
  k.gelu_forward = gelu_forward_range;
  k.gelu_backward = gelu_backward_range;
  k.bias_gelu_rows = bias_gelu_rows_reference;
  k.act_rows = act_rows_reference;
  k.bias_gelu_backward = bias_gelu_backward_reference;
  k.register_blocks = false;
  k.layernorm_rows = layernorm_rows_reference;
  k.layernorm_dx_rows = layernorm_dx_rows_reference;
  k.layernorm_param_grads = layernorm_param_grads_reference;
  k.softmax_rows = softmax_rows_reference;
  k.softmax_backward_rows = softmax_backward_rows_reference;
  k.exp_nonpos = exp_nonpos_reference;
  k.linear_forward_packed = linear_forward_packed_reference;
  k.packed_slice = kPanel;
  k.quantize_row_s8 = quantize_row_s8_reference;
  k.dequant_s8 = dequant_s8_reference;
  k.gemm_s8 = gemm_s8_reference;
  k.gemm_s8_name = "generic";
}
}  // namespace generic

}  // namespace vit::cpu
