// Ops: shape checks on tensor views, then a dispatch on the device to a backend kernel.
// Every op that trains has a forward/backward pair. Shapes use B batch, T tokens,
// C channels, H heads, K classes, M rows. Parameter gradients accumulate (+=); activation
// gradients are assigned unless the op says it accumulates.
// Masks are uint8 arrays (1 = visible) given as raw pointers with the documented shape.
#pragma once
#include <cstdint>
#include <memory>

#include "vit/core/tensor.h"

namespace vit::ops {

// The CPU backend's instruction-set path in use (generic, avx2, avx512 or neon; VIT_ISA
// forces one) and the best one this CPU runs. The first throws vit::Error for a VIT_ISA this
// CPU cannot run.
const char* cpu_isa();
const char* cpu_isa_detected();

// linear: y[M,N] = x[M,K] w[N,K]^T + b[N]; b may be null. y_zero says y holds zeros on
// entry, which the backend may use (a product that adds onto y can run faster than one
// that overwrites it); the result is the same.
void linear_forward(Tensor y, const Tensor& x, const Tensor& w, const Tensor* b, bool y_zero = false);
// Whether y_zero speeds up linear_forward (without a bias) at this shape: only then is it
// worth clearing y beforehand.
bool linear_uses_zero_output(int64_t M, int64_t K, int64_t N);
// dx (assigned, or added with accumulate_dx), dw and db (+=); any of them may be null.
void linear_backward(Tensor* dx, Tensor* dw, Tensor* db, const Tensor& dy, const Tensor& x, const Tensor& w,
                     bool accumulate_dx = false);

// bf16 inference linear: w packed once (bf16, the backend's layout), then y = bf16(x) w^T + b
// with fp32 accumulation. For inference only: the pack is a copy, later changes to w are
// not seen. bf16_available() is false where the backend has no bf16 matmul.
struct PackedLinear;
bool bf16_available();
std::shared_ptr<PackedLinear> pack_linear_bf16(const Tensor& w);
void linear_forward_bf16(Tensor y, const Tensor& x, PackedLinear& w, const Tensor* b);
// A block's MLP at bf16: y[M,N2] = fc2(gelu(fc1(x) + b1)) + b2, GELU (erf) fused into fc1's
// matmul and the hidden activations kept in bf16 (the backend's scratch), never in fp32.
void mlp_forward_bf16(Tensor y, const Tensor& x, PackedLinear& fc1, const Tensor& b1, PackedLinear& fc2,
                      const Tensor& b2);

// Mixed-precision training (ViT::set_amp, as torch.autocast(dtype=bfloat16) on nn.Linear):
// bf16 operands, fp32 accumulation and results. A bf16 copy is a uint16_t array of its
// tensor's shape (round_to_bf16: nearest even). linear_forward_amp rounds x into xb, which the
// caller keeps for the backward, then y = xb wb^T + b, where wb is w rounded to bf16.
// linear_backward_amp: dx = bf16(dy) wb (assigned), dw += bf16(dy)^T xb, db += colsum(dy);
// x and w give the shapes. Any of dx, dw, db may be null.
void round_to_bf16(uint16_t* dst, const Tensor& x);
void linear_forward_amp(Tensor y, const Tensor& x, uint16_t* xb, const Tensor& w, const uint16_t* wb,
                        const Tensor* b);
void linear_backward_amp(Tensor* dx, Tensor* dw, Tensor* db, const Tensor& dy, const Tensor& x,
                         const uint16_t* xb, const Tensor& w, const uint16_t* wb);

// Linear on weights packed in place for inference (the CPU backend: 64-row panels for its own
// kernel): pack_linear_inplace rewrites w's memory, unpack_linear_inplace restores it exactly; w keeps its
// [N,K] shape but is not a plain matrix while packed. linear_forward_packed computes what linear_forward
// computes on the unpacked w (summed in another order).
void pack_linear_inplace(Tensor& w);
void unpack_linear_inplace(Tensor& w);
// Whether linear_forward_packed is the faster one for M rows here (VIT_PACK=on|off decides instead
// when set).
bool packed_linear_preferred(int64_t M);
// gelu: y = GELU(x w^T + b) (exact, erf form) in the same pass: fc1 and its activation at inference.
void linear_forward_packed(Tensor y, const Tensor& x, const Tensor& w_packed, const Tensor* b,
                           bool gelu = false);

// layernorm over the last dim of x[M,C]; mean[M], rstd[M] saved for backward.
void layernorm_forward(Tensor y, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps);
// dx_colsum (optional, [C]): the column sums of the dx written are added to it, for the bias
// gradient of a linear layer whose output gradient is dx (the same bits as summing after).
void layernorm_backward(Tensor dx, Tensor dw, Tensor db, const Tensor& dy, const Tensor& x,
                        const Tensor& mean, const Tensor& rstd, const Tensor& w, bool accumulate_dx,
                        Tensor* dx_colsum = nullptr);

// gelu (exact erf), element-wise on same-shaped tensors.
void gelu_forward(Tensor y, const Tensor& x);
void gelu_backward(Tensor dx, const Tensor& dy, const Tensor& x);
// fc1's bias folded into the activation pass: y = GELU(h + bias) (bias along h's last
// dimension). With keep_grad (training) h becomes GELU'(h + bias), which is all the
// backward needs; otherwise h is left as it was.
void bias_gelu_forward(Tensor y, Tensor h, const Tensor& bias, bool keep_grad);
// From what bias_gelu_forward kept: dx = dy * grad, and dbias += dx summed over all but the
// last dimension (the bias gradient of the linear layer before the GELU), in one pass.
// clear_grad: grad becomes zeros as it is read (for linear_forward's y_zero).
void bias_gelu_backward(Tensor dx, Tensor& dbias, const Tensor& dy, Tensor grad, bool clear_grad = false);

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

// The class token's row alone of the two above (row 0 of each sample, over all T keys): a
// last block whose other rows nothing reads (class-token pooling). out and dout [B,1,C],
// probs and probs_drop [B,H,1,T] (the same draws as row 0 of the full op's); dqkv[B,T,3C]
// assigned whole, q's rows past 0 zeros.
void attention_cls_forward(Tensor out, Tensor probs, Tensor* probs_drop, const Tensor& qkv,
                           const uint8_t* key_mask, float drop_p, uint64_t drop_key,
                           int64_t first_sample = 0);
void attention_cls_backward(Tensor dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                            const Tensor* probs_drop, float drop_p, uint64_t drop_key,
                            int64_t first_sample = 0);

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

// pooling: x[B,T,C] -> pooled[B,C]; token pooling takes row 0, avg the mean of rows
// [first, T) that the mask[B, T-first] marks visible (all when null).
void pool_forward(Tensor pooled, const Tensor& x, const uint8_t* mask, bool avg, int64_t first);
void pool_backward(Tensor dx, const Tensor& dpooled, const uint8_t* mask, bool avg, int64_t first);

// cross entropy: logits[B,K]; labels[B] (each < K) with smoothing, or soft targets[B,K]
// (labels null). probs[B,K] written. Returns the mean loss.
double cross_entropy_forward(Tensor probs, const Tensor& logits, const int64_t* labels, const Tensor* targets,
                             float smoothing);
// dlogits = scale * d(mean loss)/dlogits (assigned).
void cross_entropy_backward(Tensor dlogits, const Tensor& probs, const int64_t* labels, const Tensor* targets,
                            float smoothing, float scale = 1.f);

}  // namespace vit::ops
