// The kernels every vector path (avx512/, avx2/, neon/) has with the same signature and no
// family header of its own (gelu.h, softmax.h, layernorm.h, narrow.h): declared once here and
// expanded in each path's namespace by its kernels.h, which adds what only that path has.
// Same conventions as cpu.h (row-major, PyTorch order).
#pragma once
#include <cstdint>

// ---- head_gemm.cpp: attention's per-head products in register blocks, no library call.
// C[M,N] = alpha * A B[K,N] + beta * C + bias (beta = 0: C is not read; bias: N floats added
// to every row, may be null), with A(i, k) = A[i ars + k aks]: (lda, 1) for A, (1, lda) for
// A^T. One thread; also gemm()'s kernel for few output columns. head_transpose: cpu::transpose()
// in register tiles, dst[cols, rows] (leading dim ldd) = src[rows, cols]^T (leading dim lds).
// ---- colsum: db[j] += the sum over rows of dy[M,N] for columns [j0, j1), each column's rows
// in order, the plain loop's bits (one thread; colsum_add hands each thread a block of columns).
// ---- linear_bf16.cpp: dst[0, n) = x rounded to bf16 (nearest even; NaN stays NaN), the bits
// of round_to_bf16_reference. One thread.
// ---- residual_run: out[0, n) = x + s branch (a product, then a sum; no fma: its file is
// compiled with -ffp-contract=off): the residual of a sample without LayerScale, one run.
// ---- patch_embed.cpp: im2col_patches' row of patches py of sample b for short patch rows
// (Pw <= 16) into out (Gw patches, C Ph Pw floats each), in vector moves.
#define VIT_PATH_KERNELS                                                                                   \
  void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,   \
                 const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc);       \
  void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols); \
  void colsum_columns(float* db, const float* dy, int64_t M, int64_t N, int64_t j0, int64_t j1);           \
  void round_to_bf16(uint16_t* dst, const float* x, int64_t n);                                            \
  void residual_run(float* out, const float* x, const float* branch, float s, int64_t n);                  \
  void copy_patch_row_short(float* out, const float* x, int64_t b, int64_t py, int64_t C, int64_t Hi,      \
                            int64_t Wi, int64_t Ph, int64_t Pw, int64_t Gw);

// Sets the table entries (kernel_set.h) every vector path has to the path's own: the kernels
// above, gelu.h's VIT_GELU_KERNELS, layernorm.h's, softmax.h's (but warm_rows: a path reads
// ahead only where it was measured to pay), narrow.h's, and the packed linear layer. The start
// of each vector path's fill_kernels (its kernels.cpp, which includes those headers); the
// lanes' group sizes and what only some paths have follow there.
#define VIT_FILL_PATH_KERNELS(k)                                         \
  do {                                                                   \
    (k).head_gemm = head_gemm;                                           \
    (k).head_transpose = head_transpose;                                 \
    (k).colsum_columns = colsum_columns;                                 \
    (k).round_to_bf16 = round_to_bf16;                                   \
    (k).residual_run = residual_run;                                     \
    (k).copy_patch_row_short = copy_patch_row_short;                     \
    (k).gelu_forward = gelu_forward;                                     \
    (k).gelu_backward = gelu_backward;                                   \
    (k).bias_gelu_rows = bias_gelu_rows;                                 \
    (k).act_rows = act_rows;                                             \
    (k).register_blocks = true;                                          \
    (k).layernorm_rows = layernorm_rows;                                 \
    (k).layernorm_dx_rows = layernorm_dx_rows;                           \
    (k).layernorm_param_grads = param_grads_columns;                     \
    (k).softmax_rows = softmax_rows;                                     \
    (k).softmax_backward_rows = softmax_backward_rows;                   \
    (k).exp_nonpos = exp_nonpos;                                         \
    (k).skinny_gemm = skinny_gemm;                                       \
    (k).attention_backward_narrow_fits = attention_backward_narrow_fits; \
    (k).attention_backward_narrow = attention_backward_narrow;           \
    (k).attention_lanes.fit = attention_lanes_fit;                       \
    (k).attention_lanes.run = attention_forward_lanes;                   \
    (k).linear_forward_packed = linear_forward_packed;                   \
  } while (0)
