// The CPU backend's kernel table: one struct of function pointers per instruction-set path,
// filled by that path's folder (generic/, avx2/, avx512/, neon/: each folder's fill_kernels)
// and chosen once by isa.cpp. An entry a folder leaves empty is the one of the path below it
// (avx512 -> avx2 -> generic, neon -> generic), so a new kernel family is one entry here and
// one function per folder that has it. A folder may pick among its own variants by what the
// CPU has beyond the path's baseline (AVX-VNNI, AVX512-VNNI, the dot-product extension).
// The int8 products are the first family here; the older families still switch on isa() in
// their dispatchers (docs/design.md, "Kernel tables").
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/isa.h"
#include "core/activation.h"

namespace vit::cpu {

// C[M, 16 nb] (int32, leading dim ldc) = A[M, Kp] (s8, leading dim lda) times nb blocks of
// packed int8 weights at W (int8.h's layout, wsum their column sums), summed exactly in int32:
// every kernel gives the generic loop's bits. Kp is a multiple of 4; one thread.
using GemmS8 = void (*)(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                        const int32_t* wsum, int64_t nb, int64_t Kp);

// q[0, K) = x[0, K) quantized to s8, symmetric (int8.h), q[K, ldq) = 0; returns the scale,
// max |x| / 127, or NaN when x holds a NaN or infinity (q is then 0). Every path gives the
// generic bits: the maximum is exact, and x / scale rounds to nearest even in each.
using QuantizeRowS8 = float (*)(int8_t* q, const float* x, int64_t K, int64_t ldq);

// y[i, j] = float(C[i, j]) * (sx[i] * sw[j]) + b[j] (b null: + 0) for rows x cols, leading
// dims ldy and ldc: the int8 product's epilogue. A product, a product, a sum, each rounded as
// written (no fused multiply-add), so every path gives the generic bits.
using DequantS8 = void (*)(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx,
                           const float* sw, const float* b, int64_t rows, int64_t cols);

// The kernels every vector path has with one signature (path_kernels.h's VIT_PATH_KERNELS,
// documented there; generic/kernels.cpp holds their plain loops).
using HeadGemm = void (*)(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars,
                          int64_t aks, const float* B, int64_t ldb, float beta, const float* bias, float* C,
                          int64_t ldc);
using HeadTranspose = void (*)(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows,
                               int64_t cols);
using ColsumColumns = void (*)(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);
using RoundToBf16 = void (*)(uint16_t* dst, const float* x, int64_t n);
using ResidualRun = void (*)(float* out, const float* x, const float* branch, float s, int64_t n);
using CopyPatchRow = void (*)(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,
                              int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw);
// GELU and the other activations (gelu.h: the ranges and rows each works on). bias_gelu_backward
// is the whole product with its threads: dx = dy grad, db += colsum(dx) in colsum_add's order.
using GeluForward = void (*)(float* y, const float* x, int64_t i0, int64_t i1);
using GeluBackward = void (*)(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1);
using BiasGeluRows = void (*)(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                              bool keep_grad);
using ActRows = void (*)(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                         bool keep_grad, Activation act);
using BiasGeluBackward = void (*)(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                  bool clear_grad);

struct CpuKernels {
  GeluForward gelu_forward = nullptr;
  GeluBackward gelu_backward = nullptr;
  BiasGeluRows bias_gelu_rows = nullptr;
  ActRows act_rows = nullptr;
  BiasGeluBackward bias_gelu_backward = nullptr;
  HeadGemm head_gemm = nullptr;
  HeadTranspose head_transpose = nullptr;
  ColsumColumns colsum_columns = nullptr;
  RoundToBf16 round_to_bf16 = nullptr;
  ResidualRun residual_run = nullptr;
  CopyPatchRow copy_patch_row_short = nullptr;  // rows of patches at most 16 pixels wide
  // Whether head_gemm is a register-block kernel (a vector path's), which attention and the
  // skinny products prefer to sgemm; the generic loop is not.
  bool register_blocks = false;

  DequantS8 dequant_s8 = nullptr;
  QuantizeRowS8 quantize_row_s8 = nullptr;
  GemmS8 gemm_s8 = nullptr;
  const char* gemm_s8_name = nullptr;  // e.g. "avx512-vnni" (vit bench and the tests name it)
};

// The table of the path in use (isa()), filled at the first call.
const CpuKernels& kernels();
// The table of path i, which this CPU must run (isa_supported).
CpuKernels kernels_for(Isa i);

// One implementation of a kernel, named, for tests that compare each with the generic one.
template <typename Fn>
struct KernelVariant {
  const char* name;
  Fn fn;
};
// Every gemm_s8 this CPU runs, generic first (each folder's variants, not only its pick).
std::vector<KernelVariant<GemmS8>> gemm_s8_variants();
// Every path's quantize_row_s8 and dequant_s8 this CPU runs, generic first.
std::vector<KernelVariant<QuantizeRowS8>> quantize_row_s8_variants();
std::vector<KernelVariant<DequantS8>> dequant_s8_variants();

// The generic entries above: plain loops (generic/kernels.cpp). copy_patch_row takes any
// patch width.
void head_gemm_reference(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars,
                         int64_t aks, const float* B, int64_t ldb, float beta, const float* bias, float* C,
                         int64_t ldc);
void colsum_columns_reference(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);
void residual_run_reference(float* out, const float* x, const float* branch, float s, int64_t n);
void gelu_forward_range(float* y, const float* x, int64_t i0, int64_t i1);
void gelu_backward_range(float* dx, const float* dy, const float* x, int64_t i0, int64_t i1);
void bias_gelu_rows_reference(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                              bool keep_grad);
void act_rows_reference(float* y, float* h, const float* bias, int64_t N, int64_t r0, int64_t r1,
                        bool keep_grad, Activation act);
void bias_gelu_backward_reference(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                                  bool clear_grad);
void copy_patch_row(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi, int64_t Wi,
                    int64_t Ph, int64_t Pw, int64_t Gw);

// Each folder's fill (its kernels.cpp): sets the entries it has for this CPU, leaves the
// others as they are.
namespace generic {
void fill_kernels(CpuKernels& k);
}
#if VIT_ISA_X86
namespace avx2 {
void fill_kernels(CpuKernels& k);
void dequant_s8(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx, const float* sw,
                const float* b, int64_t rows, int64_t cols);
float quantize_row_s8(int8_t* q, const float* x, int64_t K, int64_t ldq);
void gemm_s8(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
             const int32_t* wsum, int64_t nb, int64_t Kp);
void gemm_s8_vnni(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                  const int32_t* wsum, int64_t nb, int64_t Kp);  // AVX-VNNI (vpdpbusd on ymm)
bool has_avx_vnni();
}  // namespace avx2
namespace avx512 {
void fill_kernels(CpuKernels& k);
void dequant_s8(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx, const float* sw,
                const float* b, int64_t rows, int64_t cols);
float quantize_row_s8(int8_t* q, const float* x, int64_t K, int64_t ldq);
void gemm_s8_vnni(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                  const int32_t* wsum, int64_t nb, int64_t Kp);  // AVX512-VNNI (vpdpbusd on zmm)
bool has_vnni();
}  // namespace avx512
#endif
#if VIT_ISA_NEON
namespace neon {
void fill_kernels(CpuKernels& k);
float quantize_row_s8(int8_t* q, const float* x, int64_t K, int64_t ldq);
void gemm_s8(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
             const int32_t* wsum, int64_t nb, int64_t Kp);  // Advanced SIMD: smull + sadalp
void gemm_s8_dot(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                 const int32_t* wsum, int64_t nb, int64_t Kp);  // the dot-product extension (sdot)
bool has_dotprod();
}  // namespace neon
#endif

}  // namespace vit::cpu
