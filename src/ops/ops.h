// Ops: shape checks on tensor views, then a dispatch on the device to a backend kernel.
// Every op that trains has a forward/backward pair. Shapes use B batch, T tokens,
// C channels, H heads, K classes, M rows. Parameter gradients accumulate (+=); activation
// gradients are assigned unless the op says it accumulates.
// Masks are uint8 arrays (1 = visible) given as raw pointers with the documented shape.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/activation.h"
#include "core/bce_options.h"
#include "core/optim_rule.h"
#include "core/precision.h"
#include "core/tensor.h"

namespace vit::ops {

// The CPU backend's instruction-set path in use (generic, avx2, avx512 or neon; VIT_ISA
// forces one) and the best one this CPU runs. The first throws vit::Error for a VIT_ISA this
// CPU cannot run.
const char* cpu_isa();
const char* cpu_isa_detected();
// The library of the CPU backend's large fp32 matrix products, as it reports itself (e.g.
// "oneDNN 2.6.3", "OpenBLAS 0.3.21 (armv8, OpenMP)"; CMake's VIT_SGEMM chooses it).
const char* cpu_gemm_library();
// The CPU backend's int8 product ("amx": oneDNN's on AMX tiles; else the kernel table's gemm_s8:
// "avx512-vnni", "avx-vnni", "avx2", "neon-dotprod", "neon" or "generic") and whether it sums
// several byte products per instruction into int32 (AMX, VNNI, the dot product). Without, int8 ran at about
// fp32's speed on an AVX2 CPU (docs/design.md, "int8 inference").
const char* cpu_int8_product();
// The kernel table's int8 product, which layers too narrow for AMX run where cpu_int8_product()
// is "amx".
const char* cpu_int8_table_product();
bool cpu_int8_has_dot_product();

// linear: y[M,N] = x[M,K] w[N,K]^T + b[N], on the weights as prepare_linear left them. The
// model says once how a layer's weights are kept (the precision, packed or not); the backend
// picks the kernels for that, call by call.
struct PreparedLinear;  // the backend's copy of w (bf16 or int8 inference)
struct LinearWeights {
  LinearWeights() = default;
  LinearWeights(Tensor w_, Tensor b_ = {}) : w(std::move(w_)), b(std::move(b_)) {}
  Tensor w, b;  // [N,K] fp32 and [N] (b.data null: no bias)
  Precision precision = Precision::fp32;
  // fp32 inference on weights packed in place (the CPU backend: 64-row panels for its own
  // kernel, for few rows): w keeps its [N,K] shape but is not a plain matrix while packed.
  bool packed = false;
  std::shared_ptr<PreparedLinear> prepared;  // bf16, int8: w converted (a copy: later changes to w unseen)
  const uint16_t* w_bf16 = nullptr;  // precision amp: w rounded to bf16 ([N,K], prepare_linear's store)
};
// Prepares lw for a precision, packed or not: packing rewrites w's memory in place (and
// unpacking restores it exactly), bf16 and int8 make the backend's copy, amp rounds w into
// amp_store ([N,K] values the caller keeps; prepare again after w changes).
void prepare_linear(LinearWeights& lw, Precision precision, bool packed = false,
                    uint16_t* amp_store = nullptr);
// Whether a backend runs bf16 and amp products (the CPU: oneDNN's bf16 matmul, AVX-512).
bool bf16_available(Device d = Device::CPU);
// Why it does not, in words for an error message ("" when it does).
std::string bf16_missing(Device d = Device::CPU);
// Why bf16 runs slower than fp32 where it runs in emulation ("" where the backend runs it natively
// or not at all): for a warning.
std::string bf16_emulated(Device d = Device::CPU);
// Whether packed weights are the faster fp32 inference for M rows here (the CPU backend's
// VIT_PACK=on|off decides instead when set).
bool packed_linear_preferred(int64_t M, Device d = Device::CPU);

// What follows the product: nothing, or GELU (exact, erf form) of each output.
enum class Epilogue { none, gelu };
// amp: x is rounded to bf16 into x_bf16 ([M,K], kept by the caller for the backward).
void linear_forward(Tensor y, const Tensor& x, const LinearWeights& w, Epilogue epilogue = Epilogue::none,
                    uint16_t* x_bf16 = nullptr);
// dx (assigned, or added with accumulate_dx; fp32 only), dw and db (+=); any of them may be
// null. amp: dx = bf16(dy) w_bf16, dw += bf16(dy)^T x_bf16 (the forward's copy), db in fp32.
void linear_backward(Tensor* dx, Tensor* dw, Tensor* db, const Tensor& dy, const Tensor& x,
                     const LinearWeights& w, const uint16_t* x_bf16 = nullptr, bool accumulate_dx = false);
// w[N, K] quantized symmetric per row (an output channel) into q[N, K] and scale[N], as int8
// inference does (w ~ scale[n] q[n, k]); the same values on every device.
void quantize_int8_weights(int8_t* q, float* scale, const float* w, int64_t N, int64_t K);
// x rounded to bf16 (nearest even) into dst, a uint16_t array of x's shape.
void round_to_bf16(uint16_t* dst, const Tensor& x);

// A block's MLP: y[M,C2] = fc2(dropout(GELU(fc1(x)))) for x[M,C] and Hd hidden units, the
// GELU fused as the backend does best (bf16 inference keeps the hidden activations in bf16;
// training keeps GELU's derivative in h). MlpActs holds what the backward reads.
struct MlpActs {
  Tensor h, act;                                    // [M,Hd]: fc1's output, the activation
  uint16_t *x_bf16 = nullptr, *act_bf16 = nullptr;  // amp: the two products' inputs in bf16
  bool h_zero = false;  // the backend's: h holds zeros, left so by mlp_backward for the next forward
};
struct DropoutSite {
  float p = 0.f;
  uint64_t key = 0;
  int64_t first = 0;  // the element index of the tensor's element 0 in the whole batch
};
// keep_grad: training (h keeps act' for mlp_backward). drop: the dropout after the activation.
void mlp_forward(Tensor y, const Tensor& x, const LinearWeights& fc1, const LinearWeights& fc2, MlpActs& a,
                 bool keep_grad, const DropoutSite& drop, Activation act = Activation::gelu);
// dx[M,C] assigned; dact [M,Hd] scratch; dw1, db1, dw2 and db2 (+=; db2 may be null when the
// caller sums fc2's bias gradient elsewhere).
void mlp_backward(Tensor dx, Tensor dact, Tensor& dw1, Tensor& db1, Tensor& dw2, Tensor* db2,
                  const Tensor& dy, const Tensor& x, const LinearWeights& fc1, const LinearWeights& fc2,
                  MlpActs& a, const DropoutSite& drop);

// layernorm over the last dim of x[M,C]; mean[M], rstd[M] saved for backward.
void layernorm_forward(Tensor y, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps);
// dx_colsum (optional, [C]): the column sums of the dx written are added to it, for the bias
// gradient of a linear layer whose output gradient is dx (the same bits as summing after).
// dx may be an empty Tensor: only dw and db are accumulated (an input that takes no gradient).
void layernorm_backward(Tensor dx, Tensor dw, Tensor db, const Tensor& dy, const Tensor& x,
                        const Tensor& mean, const Tensor& rstd, const Tensor& w, bool accumulate_dx,
                        Tensor* dx_colsum = nullptr);

// gelu (exact erf), element-wise on same-shaped tensors.
void gelu_forward(Tensor y, const Tensor& x);
void gelu_backward(Tensor dx, const Tensor& dy, const Tensor& x);
// Ops with dropout take first_sample (first: the element index) of the tensor's sample 0 in
// the whole batch when it holds a shard of a data-parallel batch, so that a shard draws
// the masks the whole batch would.

// attention core: qkv[B,T,3C] -> out[B,T,C]; probs[B,H,T,T] (its data may be null when
// no backward follows: the probabilities are then not kept); probs_drop like probs or null
// (needed when drop_p > 0); key_mask[B,T] or null (masked keys get no attention).
void attention_forward(Tensor out, Tensor probs, Tensor* probs_drop, const Tensor& qkv,
                       const uint8_t* key_mask, float drop_p, uint64_t drop_key, int64_t first_sample = 0);
// dqkv[B,T,3C] assigned.
void attention_backward(Tensor dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                        const Tensor* probs_drop, float drop_p, uint64_t drop_key, int64_t first_sample = 0);

// The first Q rows alone of the two above (rows 0..Q-1 of each sample, over all T keys; Q
// from probs: the class token, and DeiT's distillation token): a last block whose other rows
// nothing reads (token pooling). out and dout [B,Q,C], probs and probs_drop [B,H,Q,T] (the
// same draws as those rows of the full op's); dqkv[B,T,3C] assigned whole, q's rows past
// Q-1 zeros.
void attention_cls_forward(Tensor out, Tensor probs, Tensor* probs_drop, const Tensor& qkv,
                           const uint8_t* key_mask, float drop_p, uint64_t drop_key,
                           int64_t first_sample = 0);
void attention_cls_backward(Tensor dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                            const Tensor* probs_drop, float drop_p, uint64_t drop_key,
                            int64_t first_sample = 0);

// The attention pool (timm's AttentionPoolLatent, SigLIP's MAP head): L learned queries
// q[L,C], the same for every sample, attend over the keys and values in rows first..T-1 of
// each sample's kv[B,T,2C] (k then v, heads concatenated as in qkv; timm 1.0 pools the patch
// tokens, first = the prefix tokens) -> out[B,L,C], H heads from probs[B,H,L,T-first] (its
// data may be null when no backward follows); key_mask[B,T-first] or null. No dropout (timm
// has none there). The backward assigns dq[B,L,C], each sample's share of the queries'
// gradient (the caller sums them), and dkv[B,T,2C], zeros in the rows before `first`.
void attention_pool_forward(Tensor out, Tensor probs, const Tensor& q, const Tensor& kv,
                            const uint8_t* key_mask, int64_t first = 0);
void attention_pool_backward(Tensor dq, Tensor dkv, const Tensor& dout, const Tensor& q, const Tensor& kv,
                             const Tensor& probs, int64_t first = 0);

// dropout in place (p = 0 is a no-op); element i draws the mask of element first + i.
void dropout_forward(Tensor x, float p, uint64_t key, int64_t first = 0);
void dropout_backward(Tensor dx, float p, uint64_t key, int64_t first = 0);
// out[B,T,C] = x + droppath(gamma * dropout(branch)), drop path per sample, gamma[C] an
// optional LayerScale; branch is dropped in place (and kept so for backward).
void residual_forward(Tensor out, const Tensor& x, Tensor branch, const Tensor* gamma, float drop_p,
                      uint64_t drop_key, float path_p, uint64_t path_key, int64_t first_sample = 0);
// residual_forward, then layernorm_forward of out into y, mean and rstd (y any shape of
// B*T*C elements, mean and rstd [B*T]): each sample normed while its rows are in cache, the
// same bits as the two calls.
struct NormOut {
  Tensor y, mean, rstd, w, b;
  float eps;
};
void residual_layernorm_forward(Tensor out, const Tensor& x, Tensor branch, const Tensor* gamma, float drop_p,
                                uint64_t drop_key, float path_p, uint64_t path_key, int64_t first_sample,
                                const NormOut& norm);
// dbranch assigned; dgamma accumulated (needs gamma and the forward's dropped branch).
void residual_backward(Tensor dbranch, Tensor* dgamma, const Tensor& dout, const Tensor* branch,
                       const Tensor* gamma, float drop_p, uint64_t drop_key, float path_p, uint64_t path_key,
                       int64_t first_sample = 0);

// patch embedding: images[B,C,H,W] -> cols[B*N, C*Ph*Pw] for patch size (ph, pw).
void im2col_patches(Tensor cols, const Tensor& images, int64_t ph, int64_t pw);
// tokens[B,T,C] = [cls] ++ [reg] ++ pe[B*N,C], plus the position embedding: pos[1,T,C] on
// every token, or pos[1,N,C] on the patches only (timm's no_embed_class). cls[1,1,C] and
// reg[1,R,C] may be null.
void tokens_forward(Tensor tokens, const Tensor& pe, const Tensor* cls, const Tensor* reg, const Tensor& pos);
// dpe assigned; dcls, dreg, dpos accumulated (each may be null).
void tokens_backward(Tensor dpe, Tensor* dcls, Tensor* dreg, Tensor* dpos, const Tensor& dtokens,
                     bool has_cls, int64_t reg_tokens, bool pos_all);

// pooling: x[B,T,C] -> pooled[B,C]; avg the mean of rows [first, T) that the mask[B, T-first]
// marks visible (all when null); token pooling takes row 0, or with pooled[K*B,C] the first K
// rows, token-major (pooled rows [k*B, (k+1)*B) hold token k: the class token, then DeiT's
// distillation token). The backward assigns dx, zero where nothing was pooled.
void pool_forward(Tensor pooled, const Tensor& x, const uint8_t* mask, bool avg, int64_t first);
void pool_backward(Tensor dx, const Tensor& dpooled, const uint8_t* mask, bool avg, int64_t first);

// The first Q tokens of each sample, sample-major: x[B,T,C] -> out[B,Q,C] (the class-token
// tail's rows); the backward assigns dx[B,T,C] from dout[B,Q,C], zeros elsewhere.
void first_tokens(Tensor out, const Tensor& x);
void first_tokens_backward(Tensor dx, const Tensor& dout);

// cross entropy: logits[B,K]; labels[B] (each < K) with smoothing, or soft targets[B,K]
// (labels null). probs[B,K] written. Returns the mean loss.
double cross_entropy_forward(Tensor probs, const Tensor& logits, const int64_t* labels, const Tensor* targets,
                             float smoothing);
// dlogits = scale * d(mean loss)/dlogits (assigned).
void cross_entropy_backward(Tensor dlogits, const Tensor& probs, const int64_t* labels, const Tensor* targets,
                            float smoothing, float scale = 1.f);

// Binary cross-entropy on logits (timm's BinaryCrossEntropy, DeiT III's and "ResNet strikes
// back"'s loss): each class a sigmoid against its own target. Targets are one-hot from labels
// with smoothing (off s/K, on 1 - s + s/K) or soft targets[B,K]; with a threshold each becomes
// 1 where it exceeds it, else 0. pos_weight scales the positive term (BCEWithLogitsLoss's,
// one value for every class). The loss is the mean over B x K, or with sum_classes the sum over
// K and the mean over B (BceOptions, core/bce_options.h). probs[B,K] gets the sigmoids.
// Returns the loss.
double bce_forward(Tensor probs, const Tensor& logits, const int64_t* labels, const Tensor* targets,
                   float smoothing, const BceOptions& o);
// dlogits = scale * d(loss)/dlogits (assigned).
void bce_backward(Tensor dlogits, const Tensor& probs, const int64_t* labels, const Tensor* targets,
                  float smoothing, const BceOptions& o, float scale = 1.f);

// Copies and fills: dst = src (the same number of elements), x = value, dst += src, x *= s.
void copy(Tensor dst, const Tensor& src);
void fill(Tensor x, float value);
void add_into(Tensor dst, const Tensor& src);
void scale(Tensor x, float s);  // x *= s
// dst = (a + b) / 2 (dst may be a): DeiT's mean of its two heads, as timm computes it.
void mean_of_two(Tensor dst, const Tensor& a, const Tensor& b);
// out[i] = the column of row i's largest value in x[M,N] (the first of equals).
void argmax_rows(int64_t* out, const Tensor& x);

// The optimizer (core/optim_rule.h): one update of count parameter tensors, each element the
// same whatever the threads; out[c] = the sum of span c's squares, in order, in double; each
// span scaled in place (by one scale, or span c by scales[c]); each element clamped to
// [-limit, limit] (NaN kept).
void optimizer_step(const ParamUpdate* updates, int64_t count, const UpdateRule& rule,
                    Device d = Device::CPU);
// LAMB (timm's Lamb) over pieces of tensors, each a ParamUpdate of its own (lr and wd its
// tensor's): the moments updated from the gradients divided by rule.grad_div, and each piece's
// sums of squares of its update and of its weights (in double, in order); then each piece's
// weights p -= lr x ratio[c] x update, the update computed again from the new moments.
void lamb_moments(const ParamUpdate* pieces, int64_t count, const UpdateRule& rule, double* update_sq,
                  double* weight_sq, Device d = Device::CPU);
void lamb_apply(const ParamUpdate* pieces, int64_t count, const UpdateRule& rule, const float* ratio,
                Device d = Device::CPU);
void sums_of_squares(double* out, const Span* x, int64_t count, Device d = Device::CPU);
void scale_spans(const Span* x, int64_t count, float scale, Device d = Device::CPU);
void scale_each_span(const Span* x, const float* scales, int64_t count, Device d = Device::CPU);
void clamp_spans(const Span* x, int64_t count, float limit, Device d = Device::CPU);

}  // namespace vit::ops
