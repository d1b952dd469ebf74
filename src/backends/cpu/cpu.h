// CPU kernels: math on raw pointers, no shape checks (the ops layer does those).
// Layout is row-major in PyTorch dimension order. Letters: B batch, T tokens, C channels
// (embed dim), H heads, D head dim, K classes, M rows of a matrix product.
// Gradient convention: parameter gradients accumulate (+=); activation gradients are
// assigned (=) unless the argument is named to accumulate.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "core/activation.h"
#include "core/bce_options.h"
#include "core/optim_rule.h"
#include "core/precision.h"
#include "core/threads.h"

namespace vit::cpu {

// f(t) for t in [0, nt), one per thread. With nt = 1 (every loop inside a data-parallel
// shard, and small work) f(0) runs directly: an OpenMP region of one thread still costs
// libgomp's entry and exit, and a mnist-seed training step entered ~150 of them
// (docs/design.md, "Fast kernels and threads").
template <typename F>
void on_threads(int nt, F&& f) {
  if (nt <= 1) {
    if (nt == 1) f(0);
    return;
  }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; ++t) f(t);
}

// Storage on 64-byte boundaries, like the arena's tensors. The kernels' scratch used to be
// plain vectors (16-byte aligned by malloc), so where a buffer fell within its cache line
// changed with unrelated heap use, and with it the speed of code nobody had touched
// (docs/design.md, "Matrix products: oneDNN on x86-64, OpenBLAS on aarch64").
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};
template <typename T>
using Scratch = std::vector<T, CacheLineAllocator<T>>;

// v's storage after growing it to at least n elements: the kernels' per-thread scratch
// (a thread_local Scratch at the call site), grown once, then reused by later calls.
template <typename T>
T* grown(Scratch<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

// f(i0, i1) over [0, n) cut into one contiguous range per thread, on up to nt threads.
template <typename F>
void for_ranges(int64_t n, int nt, F&& f) {
  nt = int(std::min<int64_t>(n, nt));
  on_threads(nt, [&](int t) { f(n * t / nt, n * (t + 1) / nt); });
}

// f(i) for i in [0, n) in contiguous per-thread ranges on up to nt threads (default: as many
// as OpenMP would use); in order on this thread when that is one.
template <typename F>
void for_items(int64_t n, int nt, F&& f) {
  for_ranges(n, nt, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) f(i);
  });
}
template <typename F>
void for_items(int64_t n, F&& f) {
  for_items(n, num_threads(), f);
}

// The element-wise activations' splits (gelu.cpp, activation.cpp), on the threads ~16
// flop-equivalents an element are worth: f(i0, i1) over [0, n) in per-thread chunks of whole
// 16-float vectors (either vector width), or f(r0, r1) over rows [0, M) of N columns.
template <typename F>
void by_vector_chunks(int64_t n, F&& f) {
  const int nt = threads_for(n * 16);
  const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
  on_threads(nt, [&](int t) {
    const int64_t i0 = t * per, i1 = i0 + per < n ? i0 + per : n;
    if (i0 < i1) f(i0, i1);
  });
}
template <typename F>
void by_row_ranges(int64_t M, int64_t N, F&& f) {
  const int nt = threads_for(M * N * 16);
  on_threads(nt, [&](int t) { f(M * t / nt, M * (t + 1) / nt); });
}

// Runs f(j0, j1) over [0, N) cut into one range of whole 16-column blocks per thread, on the
// threads `work` is worth: the backward's column sums, each column summed over its rows in
// order by one thread whatever the thread count.
template <typename F>
void by_column_blocks(int64_t N, int64_t work, F&& f) {
  const int64_t nblk = (N + 15) / 16;
  const int nt = int(std::min<int64_t>(threads_for(work), nblk));
  on_threads(nt, [&](int t) { f(std::min(N, nblk * t / nt * 16), std::min(N, nblk * (t + 1) / nt * 16)); });
}

// ---- gemm.cpp: C[M,N] = alpha * op(A) op(B) + beta * C, op = transpose when t* is true.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// C[M,N] = A[M,K] B[N,K]^T + bias (bias: N floats added to every row, may be null): the
// linear layer's product. Few output columns add the bias in the kernel's epilogue, the AVX2
// path's tiled products start their sums from it; wider products seed C with it and let sgemm
// add onto it (beta = 1). c_zero: C holds zeros on entry, so a product without bias may add
// onto it too (the result is the same).
void gemm_nt_bias(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  const float* bias, float* C, int64_t ldc, bool c_zero = false);
// Whether gemm_nt_bias without a bias makes use of c_zero at this shape (sgemm's products;
// the small and skinny kernels store C as fast as they add onto it).
bool adds_onto_zeros(int64_t M, int64_t N, int64_t K);
// The plain triple loop (double accumulation): the reference the tests compare against.
void gemm_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// C = op(A) op(B) + beta C with each output one fma chain over k in order, starting from 0
// (beta = 0), C (beta = 1) or beta C: the bits of the AVX2 path's tiled products.
void gemm_chain_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// Whether gemm() gives a product to the AVX2 path's own tiled kernel (avx2/tiled_gemm.cpp)
// instead of the library's sgemm: large products over narrow layers with A row-major (not the
// weight gradients A^T B; op(B) either way, any K), alpha 1, on AVX2; VIT_TILED=on|off
// overrides for A/B measurements (on still asks for the AVX2 path and A row-major).
bool tiled_preferred(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha);
// C = op(A) op(B) + beta C (alpha 1) in the tiled kernel, its chains started from the bias
// when one is given (avx2/kernels.h), when gemm() would give it this product; false (nothing
// done) otherwise.
bool gemm_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias);
// dst[cols, rows] (leading dim ldd) = src[rows, cols]^T (leading dim lds).
void transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);
// (Attention's per-head products and the products with few output columns in register
// blocks: avx512/ and avx2/kernels.h, head_gemm; narrow.h, skinny_gemm.)

// ---- head_gemm.cpp: attention's per-head products, one thread, on the path in use: register
// blocks (avx512/, avx2/), plain loops on generic (the reference the others are tested against).
// C[M,N] = alpha * A B[K,N] + beta * C + bias (beta = 0: C is not read; bias: N floats added
// to every row, may be null), with A(i, k) = A[i ars + k aks]: (lda, 1) for A, (1, lda) for A^T.
void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc);
// S[M,T] = alpha q[M,D] kT[D,T] (kT: k transposed, leading dim ldk), then Store: C = S;
// Softmax: C = softmax_rows(S, km); SoftmaxBackward: C = P * (S - rowsum(P * S)) (P[M,T] with
// C's leading dim; C = dS from S = dP). ldc must be T past 96 keys, and for SoftmaxBackward.
enum class HeadScores { Store, Softmax, SoftmaxBackward };
void head_scores(HeadScores mode, int64_t M, int64_t T, int64_t D, float alpha, const float* q, int64_t ldq,
                 const float* kT, int64_t ldk, const uint8_t* km, const float* P, float* C, int64_t ldc);
// transpose() in register blocks.
void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols);
// Whether the path in use has register-block kernels for head_gemm and head_scores (else they
// are the plain loops, and the attention uses oneDNN's sgemm instead).
bool head_kernels();

// ---- linear.cpp: y[M,N] = x[M,K] w[N,K]^T + b[N]  (b may be null; y_zero: y holds zeros)
void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t M, int64_t K, int64_t N,
                    bool y_zero = false);
// ---- linear_bf16.cpp: inference with bf16 weights and inputs, fp32 accumulation and output.
struct PackedBf16;   // w converted to bf16 in oneDNN's blocked layout, plus per-M primitives
struct Int8Weights;  // w in int8, per-channel scales, packed for gemm_s8 (int8.h)
bool bf16_matmul_available();
// Why it is not available, for an error message; "" when it is.
std::string bf16_matmul_missing();
// Without AVX512-BF16 or AMX oneDNN emulates bf16 on AVX-512, slower than fp32: why, in words
// ("" where bf16 runs in the CPU's own instructions, or not at all).
std::string bf16_matmul_emulated();
std::shared_ptr<PackedBf16> pack_bf16(const float* w, int64_t N, int64_t K);
// y[M,N] = bf16(x[M,K]) w^T + b[N] (b may be null). Calls on one w may run at once.
void linear_forward_bf16(float* y, const float* x, PackedBf16& w, const float* b, int64_t M);
// A transformer block's MLP in bf16: y[M,N2] = fc2(act(fc1(x))) with biases, the hidden
// activations bf16 (the activation fused into fc1's matmul, its bf16 output fc2's input).
void mlp_forward_bf16(float* y, const float* x, PackedBf16& fc1, const float* b1, PackedBf16& fc2,
                      const float* b2, int64_t M, Activation act);
// x rounded to bf16 (nearest even; NaN stays NaN) into dst, on the threads its size is worth.
// AVX-512 where isa() is avx512, else the reference loop (the same bits).
void round_to_bf16(uint16_t* dst, const float* x, int64_t n);
void round_to_bf16_reference(uint16_t* dst, const float* x, int64_t n);
// ---- linear_amp.cpp: mixed-precision training (--amp): bf16 operands, fp32 accumulation
// and results. xb[M,K] and wb[N,K] are x and w rounded to bf16 (round_to_bf16).
// y[M,N] = xb wb^T + b[N] (b may be null).
void linear_forward_amp(float* y, const uint16_t* xb, const uint16_t* wb, const float* b, int64_t M,
                        int64_t K, int64_t N);
// dx = bf16(dy) wb (assigned); dw += bf16(dy)^T xb; db += colsum(dy) in fp32. Each may be null.
void linear_backward_amp(float* dx, float* dw, float* db, const float* dy, const uint16_t* xb,
                         const uint16_t* wb, int64_t M, int64_t K, int64_t N);
// ---- linear_packed.cpp: inference on weights packed in place (no second copy), in 64-row
// panels ([K, width] each, linear_packed.h) for our own AVX-512 kernel. pack_linear_weights and
// unpack_linear_weights are exact inverses (pure data movement).
void pack_linear_weights(float* w, int64_t N, int64_t K);
void unpack_linear_weights(float* w, int64_t N, int64_t K);
// Whether packed weights beat linear_forward for M rows (AVX-512 and few rows);
// VIT_PACK=on|off overrides for A/B measurements.
bool packed_linear_preferred(int64_t M);
// y[M,N] = x[M,K] w^T + b[N] (b may be null) from packed w: each output summed over k in
// order, so the result does not depend on the thread count.
// gelu: y = GELU(x w^T + b) instead (erf form, applied as the outputs leave the registers).
void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu = false);
// dx = dy w (assigned, or added when accumulate_dx); dw += dy^T x; db += colsum(dy).
// dx, dw, db may each be null to skip.
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                     int64_t M, int64_t K, int64_t N, bool accumulate_dx);
// db[N] += sum over rows of dy[M,N]; fixed summation order for any thread count.
void colsum_add(float* db, const float* dy, int64_t M, int64_t N);

// ---- linear_weights.cpp: a linear layer as the model prepared it, and the product that
// preparation asks for (the kernels above). The backend's choice, made per call.
struct LinearOperand {
  const float* w;  // [N,K], in linear_packed.h's panels when packed
  const float* b;  // [N] or null
  int64_t N, K;
  Precision precision;
  bool packed;             // fp32 packed in place (linear_forward_packed)
  PackedBf16* bf16;        // precision bf16: w's copy
  Int8Weights* int8;       // precision int8: w quantized (int8.h)
  const uint16_t* w_bf16;  // precision amp: w rounded to bf16
};
// y[M,N] = x w^T + b (gelu: GELU of it). amp: x is rounded into x_bf16 ([M,K]) for the backward.
void linear_forward(float* y, const float* x, uint16_t* x_bf16, const LinearOperand& w, int64_t M, bool gelu);
// linear_backward's contract; amp reads the x_bf16 the forward wrote (accumulate_dx: fp32 only).
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const uint16_t* x_bf16,
                     const LinearOperand& w, int64_t M, bool accumulate_dx);
// ---- mlp.cpp: a block's MLP, y[M,N] = fc2(dropout(GELU(fc1(x)))), M rows of x[M,C], Hd hidden.
// h, act [M,Hd]: fc1's output (training: GELU' of it, keep_grad) and the activation; x_bf16,
// act_bf16: amp's copies of the two products' inputs. h_zero: h holds zeros, which fc1's
// product adds onto where that is faster (mlp_backward leaves it so there; the flag travels
// with h).
struct MlpBuffers {
  float *h, *act;
  uint16_t *x_bf16, *act_bf16;
  bool* h_zero;
};
void mlp_forward(float* y, const float* x, const LinearOperand& fc1, const LinearOperand& fc2,
                 const MlpBuffers& a, int64_t M, bool keep_grad, float drop_p, uint64_t drop_key,
                 int64_t drop_first, Activation act = Activation::gelu);
// From what mlp_forward kept: dx [M,C] (assigned), dact [M,Hd] scratch, dw1, db1, dw2 (+=),
// db2 (+=, or null when the caller sums it elsewhere).
void mlp_backward(float* dx, float* dact, float* dw1, float* db1, float* dw2, float* db2, const float* dy,
                  const float* x, const LinearOperand& fc1, const LinearOperand& fc2, const MlpBuffers& a,
                  int64_t M, float drop_p, uint64_t drop_key, int64_t drop_first);

// ---- layernorm.cpp: per row of x[M,C]; saves mean and rstd = 1/sqrt(var + eps).
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t M, int64_t C, float eps);
// dxsum (optional): the column sums of the dx written are added to it (the bias gradient
// of a linear layer whose output gradient is dx), the same bits as colsum_add afterwards.
// dx null: dw and db only (dxsum must be null too).
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int64_t M, int64_t C, bool accumulate_dx,
                        float* dxsum = nullptr);
// layernorm_forward's work on rows [i0, i1), on this thread (the fused residual below).
void layernorm_rows(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                    int64_t i0, int64_t i1, int64_t C, float eps);
// The plain loops the AVX-512 rows above are checked against.
void layernorm_forward_reference(float* y, float* mean, float* rstd, const float* x, const float* w,
                                 const float* b, int64_t M, int64_t C, float eps);
void layernorm_backward_reference(float* dx, float* dw, float* db, const float* dy, const float* x,
                                  const float* mean, const float* rstd, const float* w, int64_t M, int64_t C,
                                  bool accumulate_dx);

// ---- gelu.cpp: exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))).
// The path's vector kernels (gelu.h), else the reference loops (std::erf) below.
void gelu_forward(float* y, const float* x, int64_t n);
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n);
// fc1's bias and activation in one pass: y = GELU(h + bias) (bias added to each row of
// h[M,N]); fc1's product runs without a bias, so nothing seeds its output first. With
// keep_grad, h becomes GELU'(h + bias), all the backward needs (from the erf and exp the
// forward computes anyway); otherwise h is left as it was.
void bias_gelu_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad);
// The backward from what bias_gelu_forward kept: dx = dy * grad, and db += the column sums
// of dx (fc1's bias gradient) in the same pass. The same bits as gelu_backward on h + bias
// then colsum_add. dx may equal dy. clear_grad: grad becomes zeros as it is read (its lines
// are in cache then), so that the next forward's fc1 product can add onto it (gemm_nt_bias).
void bias_gelu_backward(float* dx, float* db, const float* dy, float* grad, int64_t M, int64_t N,
                        bool clear_grad = false);
void gelu_forward_reference(float* y, const float* x, int64_t n);
void gelu_backward_reference(float* dx, const float* dy, const float* x, int64_t n);

// ---- activation.cpp: the MLP's other activations (GELU's tanh form, QuickGELU) as plain
// loops over the threads; gelu goes to the kernels above. Element-wise, so the same bits on
// any thread count. act_forward: y = act(x) (y may be x). bias_act_forward: as
// bias_gelu_forward, h becoming act'(h + bias) with keep_grad, which bias_gelu_backward reads.
void act_forward(float* y, const float* x, int64_t n, Activation act);
void bias_act_forward(float* y, float* h, const float* bias, int64_t M, int64_t N, bool keep_grad,
                      Activation act);

// ---- attention.cpp: multi-head self-attention core on qkv[B,T,3C] (q|k|v, heads split).
// probs[B,H,T,T] = softmax(scale q k^T) with masked keys (key_mask[B,T] == 0) excluded;
// probs may be null in the forward (inference without dropout): they are not kept.
// When attn dropout is on, probs_drop holds the dropped copy used for out; else null.
// out[B,T,C] = probs_drop v, heads concatenated.
void attention_forward(float* out, float* probs, float* probs_drop, const float* qkv, const uint8_t* key_mask,
                       int64_t B, int64_t T, int64_t C, int64_t H, float drop_p, uint64_t drop_key,
                       int64_t first_sample = 0);
// Softmax of rows x n in place (row-wise), keys with km[j] == 0 excluded (km may be null);
// a row with every key masked becomes 0. AVX-512 when available, else the reference.
void softmax_rows(float* P, int64_t rows, int64_t n, const uint8_t* km);
void softmax_rows_reference(float* P, int64_t rows, int64_t n, const uint8_t* km);
// y[i] = exp(x[i]) for x[i] <= 0 as the softmax kernels of the path in use compute it
// (within 2e-7 relative), 0 below -87.3365 (where expf turns subnormal), NaN for NaN: for
// the tests.
void exp_nonpos(float* y, const float* x, int64_t n);
// Its backward in place: dP = P * (dP - rowsum(P * dP)).
void softmax_backward_rows(float* dP, const float* P, int64_t rows, int64_t n);
void softmax_backward_rows_reference(float* dP, const float* P, int64_t rows, int64_t n);
// dqkv (assigned) from dout; each head's dP lives in a per-thread scratch.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const float* probs_drop, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                        uint64_t drop_key, int64_t first_sample = 0);

// Start of head h of sample b inside qkv[B,T,3C] (its q; k and v follow at +C and +2C).
inline int64_t head_offset(int64_t b, int64_t h, int64_t T, int64_t C, int64_t D) {
  return b * T * 3 * C + h * D;
}

// One head's q, k, v in qkv [B,T,3C] and its dq, dk, dv in dqkv: row stride 3C each.
struct HeadGrads {
  const float *q, *k, *v;
  float *dq, *dk, *dv;
};
inline HeadGrads head_grads(const float* qkv, float* dqkv, int64_t b, int64_t h, int64_t T, int64_t C,
                            int64_t D) {
  const int64_t o = head_offset(b, h, T, C, D);
  return {qkv + o, qkv + o + C, qkv + o + 2 * C, dqkv + o, dqkv + o + C, dqkv + o + 2 * C};
}
// Attention dropout's mask on probabilities: dst = src with element first+i kept (scaled by
// 1/(1-p)) or zeroed, the same draw in forward and backward. dst may equal src.
void drop_probs(float* dst, const float* src, int64_t n, float p, uint64_t key, int64_t first);

// ---- attention_cls.cpp: the first Q rows alone of each sample (the class token's, and DeiT's
// distillation token's) of attention_forward and attention_backward, for a last block whose
// other rows nothing reads: out[B,Q,C], probs[B,H,Q,T] (may be null when no backward
// follows), probs_drop like probs or null; the backward assigns all of dqkv[B,T,3C] (q's rows
// past Q-1 are zeros) from dout[B,Q,C].
void attention_cls_forward(float* out, float* probs, float* probs_drop, const float* qkv,
                           const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                           uint64_t drop_key, int64_t first_sample = 0, int64_t Q = 1);
void attention_cls_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                            const float* probs_drop, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                            uint64_t drop_key, int64_t first_sample = 0, int64_t Q = 1);

// The attention pool (timm's AttentionPoolLatent): L queries q[L,C], shared by every sample,
// over each sample's keys and values in rows first..T-1 of kv[B,T,2C] (k, then v) ->
// out[B,L,C]; probs[B,H,L,T-first] or null (not kept); key_mask[B,T-first] or null. The
// backward assigns dq[B,L,C] (each sample's share) and dkv[B,T,2C] (zeros in rows < first).
void attention_pool_forward(float* out, float* probs, const float* q, const float* kv,
                            const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H, int64_t L,
                            int64_t first = 0);
void attention_pool_backward(float* dq, float* dkv, const float* dout, const float* q, const float* kv,
                             const float* probs, int64_t B, int64_t T, int64_t C, int64_t H, int64_t L,
                             int64_t first = 0);

// (Narrow heads, D <= 8, in AVX-512 and AVX2: narrow.h, attention_backward_narrow and
// attention_forward_lanes, which attention_forward and attention_backward take.)

// ---- dropout.cpp: counter-based masks (see core/rng.h).
// `first` / `first_sample`: the global index of element / sample 0 when a process holds
// a shard of the batch (data-parallel training), so every shard draws the masks the whole
// batch would.
// Element dropout in place: x[i] = keep(first + i) ? x[i] / (1-p) : 0.
void dropout_forward(float* x, int64_t n, float p, uint64_t key, int64_t first = 0);
// Same mask applied to a gradient, in place.
void dropout_backward(float* dx, int64_t n, float p, uint64_t key, int64_t first = 0);
// ---- residual.cpp: residual sums (`first_sample` as dropout's).
// Residual with drop path (stochastic depth, per sample), dropout on the branch and an
// optional LayerScale gamma[C]: out[B,T,C] = x + droppath(gamma * dropout(branch)).
// branch is dropped in place (backward's dgamma needs it); out may alias x.
void residual_forward(float* out, const float* x, float* branch, const float* gamma, int64_t B, int64_t T,
                      int64_t C, float drop_p, uint64_t drop_key, float path_p, uint64_t path_key,
                      int64_t first_sample = 0);
// residual_forward, then the LayerNorm of out (layernorm_forward into y, mean, rstd), each
// sample's rows normed by the thread that summed them, while they are in its cache: the same
// bits as the two calls, one read of out less.
struct NormOut {
  float *y, *mean, *rstd;
  const float *w, *b;
  float eps;
};
void residual_layernorm_forward(float* out, const float* x, float* branch, const float* gamma, int64_t B,
                                int64_t T, int64_t C, float drop_p, uint64_t drop_key, float path_p,
                                uint64_t path_key, int64_t first_sample, const NormOut& norm);
// dbranch = dropout'(gamma * droppath'(dout)) (assigned); dgamma += sum of droppath'(dout) *
// branch (the dropped branch the forward left), when gamma is given. The residual path's
// gradient is dout itself.
void residual_backward(float* dbranch, float* dgamma, const float* dout, const float* branch,
                       const float* gamma, int64_t B, int64_t T, int64_t C, float drop_p, uint64_t drop_key,
                       float path_p, uint64_t path_key, int64_t first_sample = 0);

// ---- optimizer.cpp: one update of count parameter tensors (core/optim_rule.h) in one
// parallel region on nt threads, each thread a static share of every tensor; out[c] = the sum
// of span c's squares (in order, in double); spans scaled in place.
void optimizer_step(const ParamUpdate* u, int64_t count, const UpdateRule& r, int nt);
// LAMB in two passes over count pieces of tensors (ops.h): the moments, and each piece's
// sums of squares of the update and of the weights; then p -= lr x ratio[c] x update.
void lamb_moments(const ParamUpdate* u, int64_t count, const UpdateRule& r, double* update_sq,
                  double* weight_sq, int nt);
void lamb_apply(const ParamUpdate* u, int64_t count, const UpdateRule& r, const float* ratio, int nt);
void sums_of_squares(double* out, const Span* x, int64_t count, int nt);
void scale_spans(const Span* x, int64_t count, float scale, int nt);
void scale_each_span(const Span* x, const float* scales, int64_t count, int nt);
void clamp_spans(const Span* x, int64_t count, float limit, int nt);

// ---- elementwise.cpp: n floats copied, set, added (dst += src); out[i] = the column of row
// i's largest value in x[M,N] (the first of equals).
void copy_values(float* dst, const float* src, int64_t n);
void fill_values(float* x, int64_t n, float value);
void add_into(float* dst, const float* src, int64_t n);
void scale_values(float* x, int64_t n, float s);
void mean_of_two(float* dst, const float* a, const float* b, int64_t n);  // (a + b) / 2; dst may be a
void argmax_rows(int64_t* out, const float* x, int64_t M, int64_t N);

// ---- patch_embed.cpp: x[B,C,Hi,Wi] -> cols[B*N, C*Ph*Pw] (patch-major, conv weight order).
void im2col_patches(float* cols, const float* x, int64_t B, int64_t C, int64_t Hi, int64_t Wi, int64_t Ph,
                    int64_t Pw);
// Builds tokens[B,T,C] from patch embeddings pe[B*N,C]: prefix tokens first (the class
// token cls[C] when has_cls, then R register tokens reg[R,C]), then the patches. The
// position embedding is added to every token (pos[T,C], pos_all) or to the patches only
// (pos[N,C], timm's no_embed_class).
void tokens_forward(float* tokens, const float* pe, const float* cls, const float* reg, const float* pos,
                    int64_t B, int64_t N, int64_t C, int64_t R, bool has_cls, bool pos_all);
// dpe (assigned), dcls, dreg and dpos (+=, each may be null) from dtokens.
void tokens_backward(float* dpe, float* dcls, float* dreg, float* dpos, const float* dtokens, int64_t B,
                     int64_t N, int64_t C, int64_t R, bool has_cls, bool pos_all);

// ---- pooling.cpp: token pooling copies rows 0..K-1 into pooled[K*B, C], token-major; avg
// pooling (K 1) means rows [first, T) that are visible (mask[B, T-first] != 0, or all when
// mask is null).
void pool_forward(float* pooled, const float* x, const uint8_t* mask, int64_t B, int64_t T, int64_t C,
                  bool avg, int64_t first, int64_t K);
// out[B,Q,C] = x[:, :Q]; dx[B,T,C] (assigned) = dout in the first Q rows, zeros elsewhere.
void first_tokens(float* out, const float* x, int64_t B, int64_t T, int64_t C, int64_t Q);
void first_tokens_backward(float* dx, const float* dout, int64_t B, int64_t T, int64_t C, int64_t Q);
// dx (assigned, all rows written) from dpooled.
void pool_backward(float* dx, const float* dpooled, const uint8_t* mask, int64_t B, int64_t T, int64_t C,
                   bool avg, int64_t first, int64_t K);

// ---- cross_entropy.cpp: mean over B of -sum(target * log_softmax(logits)).
// target is one-hot from labels (with smoothing eps) or soft targets[B,K] (labels null).
// Writes probs[B,K]; returns the mean loss.
double cross_entropy_forward(float* probs, const float* logits, const int64_t* labels, const float* targets,
                             int64_t B, int64_t K, float smoothing);
// dlogits = scale * (probs - target) / B (assigned).
void cross_entropy_backward(float* dlogits, const float* probs, const int64_t* labels, const float* targets,
                            int64_t B, int64_t K, float smoothing, float scale);

// ---- cross_entropy.cpp too: binary cross-entropy on logits (BceOptions says which).
double bce_forward(float* probs, const float* logits, const int64_t* labels, const float* targets, int64_t B,
                   int64_t K, float smoothing, const BceOptions& o);
void bce_backward(float* dlogits, const float* probs, const int64_t* labels, const float* targets, int64_t B,
                  int64_t K, float smoothing, const BceOptions& o, float scale);

}  // namespace vit::cpu
