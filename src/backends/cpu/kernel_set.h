// The CPU backend's kernel table: one struct of function pointers per instruction-set path,
// filled by that path's folder (generic/, avx2/, avx512/, neon/: each folder's fill_kernels)
// and chosen once by isa.cpp. An entry a folder leaves empty is the one of the path below it
// (avx512 -> avx2 -> generic, neon -> generic), so a new kernel family is one entry here and
// one function per folder that has it. A folder may pick among its own variants by what the
// CPU has beyond the path's baseline (AVX-VNNI, AVX512-VNNI, the dot-product extension).
// Every kernel family is here: the dispatchers at the top of backends/cpu/ call
// kernels().entry and never ask which path is in use (docs/design.md, "Kernel tables").
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu.h"  // HeadScores
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

// LayerNorm (layernorm.h: the rows or columns each works on; one thread). The one-pass
// backward (dx, the parameter gradients and dxsum in one walk) runs where it fits, on one thread.
using LayerNormRows = void (*)(float* y, float* mean, float* rstd, const float* x, const float* w,
                               const float* b, int64_t i0, int64_t i1, int64_t C, float eps);
using LayerNormDxRows = void (*)(float* dx, const float* dy, const float* x, const float* mean,
                                 const float* rstd, const float* w, int64_t i0, int64_t i1, int64_t C,
                                 bool accumulate_dx);
using LayerNormParamGrads = void (*)(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                     const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1);
using LayerNormOnePassFits = bool (*)(int64_t C);
using LayerNormBackwardOnePass = void (*)(float* dx, float* dw, float* db, float* dxsum, const float* dy,
                                          const float* x, const float* mean, const float* rstd,
                                          const float* w, int64_t M, int64_t C, bool accumulate_dx);
// Attention's row softmax, its backward, exp of non-positive arguments, and the read of a
// sample's rows in order before its heads (softmax.h, cpu.h).
using SoftmaxRows = void (*)(float* P, int64_t rows, int64_t n, const uint8_t* km);
using SoftmaxBackwardRows = void (*)(float* dP, const float* P, int64_t rows, int64_t n);
using ExpNonpos = void (*)(float* y, const float* x, int64_t n);
using WarmRows = void (*)(const float* p, int64_t n);
// The narrow shapes' kernels (narrow.h): skinny products (false: shape not taken), the
// one-pass backward of narrow heads, and the forward with samples along the lanes.
using SkinnyGemm = bool (*)(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                            const float* B, int64_t ldb, float beta, const float* bias, float* C,
                            int64_t ldc);
using NarrowBackwardFits = bool (*)(int64_t T, int64_t D);
using AttentionBackwardNarrow = void (*)(float* dq, float* dk, float* dv, const float* q, const float* k,
                                         const float* v, int64_t ld, const float* dO, int64_t ldo,
                                         const float* P, int64_t T, int64_t D, float scale);
using LanesFit = bool (*)(int64_t T, int64_t C, int64_t H);
using AttentionForwardLanes = void (*)(float* out, float* probs, const float* qkv, const uint8_t* key_mask,
                                       int64_t n, int64_t T, int64_t C, int64_t H);
// Samples along the lanes come in groups of `group`; a last group of fewer than `min_last`
// samples goes per head instead (attention.cpp).
struct AttentionLanes {
  LanesFit fit = nullptr;
  AttentionForwardLanes run = nullptr;
  int64_t group = 0, min_last = 0;
};
// head_scores (cpu.h) with the softmax applied in registers.
using HeadScoresFused = void (*)(HeadScores mode, int64_t M, int64_t T, int64_t D, float alpha,
                                 const float* q, int64_t ldq, const float* kT, int64_t ldk, const uint8_t* km,
                                 const float* P, float* C, int64_t ldc);
// The tiled product (avx2/kernels.h) and the packed linear layer (linear_packed.h).
using TiledGemm = void (*)(bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int nt,
                           const float* bias);
using LinearForwardPacked = void (*)(float* y, const float* x, const float* wp, const float* b, int64_t M,
                                     int64_t K, int64_t N, bool gelu);

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

  LayerNormRows layernorm_rows = nullptr;
  LayerNormDxRows layernorm_dx_rows = nullptr;
  LayerNormParamGrads layernorm_param_grads = nullptr;
  LayerNormOnePassFits layernorm_one_pass_fits = nullptr;          // null: no one-pass backward
  LayerNormBackwardOnePass layernorm_backward_one_pass = nullptr;  // (both set, or neither)

  SoftmaxRows softmax_rows = nullptr;
  SoftmaxBackwardRows softmax_backward_rows = nullptr;
  ExpNonpos exp_nonpos = nullptr;
  WarmRows warm_rows = nullptr;  // null: heads read their rows where they lie

  SkinnyGemm skinny_gemm = nullptr;  // null: head_gemm takes every skinny product
  NarrowBackwardFits attention_backward_narrow_fits = nullptr;
  AttentionBackwardNarrow attention_backward_narrow = nullptr;  // null: the per-head backward
  AttentionLanes attention_lanes;                               // run null: per head only
  HeadScoresFused head_scores = nullptr;  // null: head_gemm, then softmax_rows or its backward

  TiledGemm tiled_gemm = nullptr;  // null: gemm() never tiles
  LinearForwardPacked linear_forward_packed = nullptr;
  int64_t packed_slice = 0;     // columns per stored slice of packed weights (linear_packed.h)
  int64_t packed_max_rows = 0;  // packed weights preferred up to this many rows (0: never)

  DequantS8 dequant_s8 = nullptr;
  QuantizeRowS8 quantize_row_s8 = nullptr;
  GemmS8 gemm_s8 = nullptr;
  const char* gemm_s8_name = nullptr;  // e.g. "avx512-vnni" (vit info, vit bench and the tests name it)
  bool gemm_s8_dot = false;            // four byte products per instruction into int32 (VNNI, sdot)
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
void layernorm_rows_reference(float* y, float* mean, float* rstd, const float* x, const float* w,
                              const float* b, int64_t i0, int64_t i1, int64_t C, float eps);
void layernorm_dx_rows_reference(float* dx, const float* dy, const float* x, const float* mean,
                                 const float* rstd, const float* w, int64_t i0, int64_t i1, int64_t C,
                                 bool accumulate_dx);
void layernorm_param_grads_reference(float* dw, float* db, const float* dy, const float* x, const float* mean,
                                     const float* rstd, int64_t M, int64_t C, int64_t j0, int64_t j1);
void exp_nonpos_reference(float* y, const float* x, int64_t n);
// Plain loops over packed weights of any slice width (packed_slice() of the path in use), GELU
// as a pass over y.
void linear_forward_packed_reference(float* y, const float* x, const float* wp, const float* b, int64_t M,
                                     int64_t K, int64_t N, bool gelu);
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
