// The Vision Transformer: parameters, gradients and activations in arenas laid out by the
// parameter table, an explicit forward that keeps what backward needs, a backward that
// mirrors it in reverse, and an inference path that keeps nothing.
//
//   x0 = [cls] ++ patch_embed(images) + pos_embed, pos dropout
//   per block: x = x + droppath(drop(proj(attn(norm1(x)))))
//              x = x + droppath(drop(fc2(drop(gelu(fc1(norm2(x)))))))
//   pooled = x[:, 0] (token) or mean of patch tokens (avg); norm / fc_norm; head dropout; head
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/params.h"
#include "ops/ops.h"

namespace vit {

// Dropout keys. Dropout, drop path and head dropout act only when train is true; masks
// depend on (seed, step, site, index) alone. first_sample: the index of this batch's
// sample 0 in the global batch when a data-parallel process holds a shard of it.
struct ForwardMode {
  bool train = false;
  uint64_t seed = 0;
  uint64_t step = 0;
  int64_t first_sample = 0;
  // DeiT's distillation training (timm's set_distilled_training) on a model with head_dist:
  // forward returns the class token's head alone and dist_logits() the distillation head's,
  // not their mean; backward takes a gradient for each.
  bool distill = false;
};

class ViT {
 public:
  // randomize = false leaves every parameter 0 (the arena's pages are untouched until
  // written): for loaders that overwrite all of them. The random initialization draws one
  // value at a time and takes seconds for ViT-B/16 (2.5 s of a 6.6 s `vit predict`).
  explicit ViT(const ViTConfig& cfg, bool randomize = true);
  ViT(const ViT&) = delete;
  ViT& operator=(const ViT&) = delete;

  const ViTConfig& config() const { return cfg_; }
  const ParamTable& table() const { return table_; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  const Arena& params() const { return params_; }
  Tensor param(const std::string& name);
  Tensor grad(const std::string& name);

  void init_weights(uint64_t seed);
  void zero_grad() { grads_.zero(); }

  // Training forward: images[B,C,H,W], mask[B,N] or null. The mask is B x num_patches()
  // bytes, one per patch (the prefix tokens are always visible and have none; nonzero =
  // visible), read without a size: a [1,N] mask is not broadcast. Every mask parameter
  // below is the same. Returns the logits [B,K], valid until the next forward.
  Tensor forward(const float* images, int64_t B, const uint8_t* mask, const ForwardMode& mode);
  // Accumulates parameter gradients from dlogits[B,K] of the last forward.
  void backward(const Tensor& dlogits);
  // After a forward with mode.distill: the distillation head's logits [B,K] (valid until the
  // next forward), and the backward from a gradient for each head's logits.
  Tensor dist_logits();
  void backward(const Tensor& dlogits, const Tensor& ddist);
  // Inference: logits[B,K] written to out; stores one block's activations only.
  void infer(const float* images, int64_t B, const uint8_t* mask, float* logits);
  // Inference that also copies every layer's attention probabilities (the softmax output)
  // to attn[depth, B, H, T, T], T = num_tokens(): row t of [b, h] is where token t looks.
  // attn may be null (the plain infer above); otherwise one copy per layer is added.
  void infer(const float* images, int64_t B, const uint8_t* mask, float* logits, float* attn);
  // The same, and for a model with the attention pool (map_pool) its query's attention over
  // the tokens to pool_attn[B, H, T] (heads in order; zeros on the prefix tokens, which the pool
  // leaves out as timm 1.0's does unless pool_include_prefix; may be null). A model without a head
  // (num_classes 0) gives the maps alone: logits null, attn or pool_attn not.
  void infer(const float* images, int64_t B, const uint8_t* mask, float* logits, float* attn,
             float* pool_attn);
  // Features instead of logits (timm's forward_head(pre_logits=True) and forward_features):
  // pooled[B, D], the vector the head reads (pooled and normed: the embedding); tokens[B, T, D],
  // every token after the final norm (unnormed when the model has fc_norm, as in timm, whose
  // `norm` is then the identity). Either may be null. The only inference a model without a
  // head (num_classes 0, timm's headless models) has.
  void infer_features(const float* images, int64_t B, const uint8_t* mask, float* pooled, float* tokens);
  // timm's forward_intermediates: blocks[l] null, or where the residual stream after block l
  // goes ([B, T, D], before the final norm; blocks has depth entries); tokens as above.
  void infer_blocks(const float* images, int64_t B, const uint8_t* mask, const std::vector<float*>& blocks,
                    float* tokens);
  // Whether the model has a classifier head (num_classes > 0).
  bool has_head() const { return cfg_.num_classes > 0; }

  // Inference precision of the blocks' matrix products (qkv, proj, fc1, fc2): "fp32" (the
  // default), "bf16" (weights converted and packed once from the current parameters,
  // inputs rounded to bf16, fp32 accumulation) or "int8" (weights quantized once per output
  // channel, inputs per row at each call, int32 sums: backends/cpu/int8.h); patch embedding,
  // attention, norms and head stay fp32. For inference after the weights are final: training steps do not use
  // it, and later changes to the parameters are not seen until it is set again.
  //
  // release_fp32 (bf16, int8): each of the blocks' four fp32 matrices is zeroed and its memory
  // given back to the system as soon as its copy is made, so the weights then cost their
  // bf16 (int8) size (ViT-B/16 at batch 1: resident 524 -> 200 MiB; the peak, 346 MiB, is the fp32
  // weights plus one bf16 matrix while converting). The model then only infers in that dtype:
  // training, fp32, packing and saving refuse it (load the weights again for those).
  // Setting the dtype the model already has with its fp32 released checks nothing more: a
  // loader's (below) is then confirmed.
  void set_infer_dtype(const std::string& dtype, bool release_fp32 = false);
  // For loaders: set_infer_dtype(dtype, true)'s work on the next block alone (0, 1, ...; the
  // model counts them), once its weights are in place. A load for bf16 or int8 inference then holds one
  // block's fp32 matrices at a time, not the model's (ViT-L/16 from a vit quantize file: peak 1.28 -> 0.40
  // GB). set_infer_dtype(dtype, true) after the last block sets the model's dtype; before it the model does
  // not infer.
  void prepare_next_infer_block(const std::string& dtype);
  const std::string& infer_dtype() const { return infer_dtype_; }
  bool fp32_released() const { return fp32_released_; }

  // fp32 inference with the blocks' four weight matrices (qkv, proj, fc1, fc2) packed in
  // place for the CPU kernel made for few rows: batch 1 and other small batches, where it
  // beats oneDNN's sgemm (which repacks the weights at every call). Packing
  // rewrites the parameters' memory (no copy: peak memory stays the weights plus one block's
  // activations), so a packed model only infers: training steps, bf16 and saving refuse it
  // until unpack_weights() restores the parameters exactly. Logits agree with the unpacked
  // model's to float rounding (another summation order). No-op when already packed.
  void pack_weights() { set_weights_packed(true); }
  void unpack_weights() { set_weights_packed(false); }
  // pack_weights() when packed is the faster fp32 inference for batches of up to max_batch
  // images here (ops::packed_linear_preferred); returns whether the weights are packed.
  // Packing is for fp32 inference: it refuses bf16.
  bool pack_weights_if_faster(int64_t max_batch);
  bool weights_packed() const { return weights_packed_; }
  // The parameters as the fp32 values a checkpoint or an export writes out (params() laid out
  // by table()). While the weights are in an inference form (packed, or the fp32 block
  // weights released) there are no such values: an error that begins with `what`
  // ("<path>: not saved") and says why.
  const float* fp32_params(const std::string& what) const;

  // Mixed-precision training (torch.autocast with bfloat16 on the blocks' nn.Linear layers):
  // forward() and backward() run the blocks' four matrix products (qkv, proj, fc1, fc2) on
  // bf16 operands with fp32 accumulation and fp32 results. The parameters, their gradients,
  // the optimizer, patch embedding, attention, norms, GELU and the head stay fp32. Each
  // forward() rounds the current weights to bf16 once; each product rounds its input and
  // keeps that copy for the backward. Inference (infer()) is not affected. Throws where the
  // CPU has no bf16 matrix product.
  void set_amp(bool on);
  bool amp() const { return amp_; }

  // Fine-tuning the head alone (linear probing): backward stops after the head's gradients.
  void set_backbone_frozen(bool frozen) { backbone_frozen_ = frozen; }
  bool backbone_frozen() const { return backbone_frozen_; }

  // Data-parallel shards. With T > 1 threads, a training batch of B >= T images is cut into
  // T row shards, and each shard runs forward and backward on one thread in a ViT of its
  // own (its own activations and gradient arena, this model's weights); the shards' gradients
  // are then summed in a fixed order. Small models gain most: their operations are too
  // small to split across threads (mnist-seed's step holds ~100 parallel regions, each a
  // wake-up and a barrier). Results depend on the thread count (another summation order),
  // not on timing: the same seed and thread count give the same bits. Inference splits
  // the same way for fp32 weights that are not packed, when no attention maps are asked for.
  // set_shards(1) turns shards off; set_shards(0) (the default) uses one per thread, or the
  // count in the environment variable VIT_SHARDS when set.
  void set_shards(int shards) { shards_wanted_ = shards; }
  // The class-token tail: with class-token pooling nothing reads the last block's other rows,
  // so after its qkv product that block runs for the class token's row alone (and DeiT's
  // distillation token's with head_dist: head_tokens() rows; attention over all keys for those
  // queries, proj, norm2, MLP and residuals on B rows each instead of B*T),
  // forward and backward: the same logits and gradients up to float rounding, for 1/depth
  // less of the work. Dropout after proj and in the MLP draws other (equally random) masks
  // on those rows than the full block would; attention dropout and drop path draw the same.
  // It applies with a class token and token pooling (cls_tail_applies) unless VIT_CLS_TAIL=off;
  // set_cls_tail(false) turns it off for one model (comparisons); attention maps
  // (infer with attn) run the full block.
  static bool cls_tail_applies(const ViTConfig& cfg);
  bool use_cls_tail() const;
  void set_cls_tail(bool on) { cls_tail_wanted_ = on; }
  // Shards a batch of B runs in: min(B, shards or threads) when shards are on, else 1.
  int shards_for(int64_t B) const;
  // Shards an inference of B (without attention maps) runs in: 1 on packed or bf16 weights,
  // else shards_for(B), but when the count is not one asked for (set_shards, VIT_SHARDS),
  // only as many as leave each shard enough work to pay for waking a thread (1.5 MFLOP:
  // mnist-seed from 16 images; shards.cpp).
  int infer_shards(int64_t B) const;
  // Images of an inference of B on R shards that run after the shards, on every thread (split
  // per operation), so that the shards stay even: B % R when that is at most half of R and
  // the count is automatic and an image costs more than a pass's start, else 0 (R shards of
  // B / R or one more). A shard of one image more than the others makes every other thread
  // wait a whole image: on two threads (an AMD EPYC, Zen 2) ViT-S/16 at batch 5 ran 16.3
  // images/s as 2 + 3 and 18.8 as 2 + 2, then 1 on both threads; at batch 7 17.4 and 19.0;
  // ViT-Ti/16 at batch 5 56.6 and 63-65. On 16 threads a 17th image would otherwise hold
  // the batch for a second image's time.
  int64_t infer_rest(int64_t B, int R) const;
  // Whether the shard count was asked for (set_shards, VIT_SHARDS) rather than automatic.
  bool shard_count_asked() const;

  // A replica: another model on this one's parameters and prepared weights (shared, not
  // copied), with activations of its own, to infer at the same time as this model on other
  // threads (vit serve --instances). It takes this model's inference settings as they are
  // now (dtype, packing, class-token tail, shards). This model must outlive it, and its
  // parameters and settings must not change while it lives. A replica only infers.
  std::unique_ptr<ViT> replica() const;
  bool is_replica() const { return owner_ != this; }

  // Bytes held by the training and inference activation arenas (for reports), shards included.
  size_t activation_bytes() const;
  // Bytes the activation arenas will take for batch B (training: every block's activations
  // and the gradient buffers; inference: one block's), split into `shards` shards, without
  // building the model; amp: with the bf16 copies of mixed-precision training.
  static size_t planned_activation_bytes(const ViTConfig& cfg, int64_t B, bool training, int shards = 1,
                                         bool amp = false);

 private:
  // The parameters as named views (model/weights.h), bound from the table.
  using BlockWeights = vit::BlockWeights;
  using PoolWeights = vit::PoolWeights;
  using Weights = vit::Weights;
  struct BlockActs {
    Tensor ln1, ln1_mean, ln1_rstd, qkv, probs, probs_drop, ao, r1, ln2, ln2_mean, ln2_rstd, out;
    ops::MlpActs mlp;  // fc1's output and the activation (and amp's bf16 copies of fc1's, fc2's inputs)
    Tensor br1, br2;   // the branches before LayerScale (training with LayerScale only)
    // amp: qkv's and proj's inputs rounded to bf16 in the forward, read by the backward.
    uint16_t *ln1_b = nullptr, *ao_b = nullptr;
  };
  // The attention pool's activations (map_pool), for one latent query: q [1,C] its projection;
  // kv [B*T,2C] from the normed tokens (lnf); probs [B,H,1,T]; ao [B,1,C] the heads' output;
  // y [B,C] after proj; ln its norm; branch the MLP's output (pooled_ln = y + branch). The
  // gradients (training): dq [B,1,C] each sample's, dqsum [1,C] their sum, dkv, dy, dao, dln,
  // dact.
  struct PoolActs {
    Tensor q, kv, probs, ao, y, ln, ln_mean, ln_rstd, branch;
    ops::MlpActs mlp;
    Tensor dq, dqsum, dkv, dy, dao, dln, dact;
  };
  struct Acts {
    int64_t B = 0;
    bool amp = false;   // laid out with the bf16 copies of BlockActs
    bool tail = false;  // laid out for the class-token tail (use_cls_tail)
    // pooled, pooled_ln: [B,C], or [2B,C] with head_dist (class tokens, then distillation tokens).
    Tensor cols, pe, x0, branch, pooled, pooled_mean, pooled_rstd, pooled_ln, logits;
    Tensor logits_dist;                // head_dist's logits before the mean (head_dist only)
    Tensor x_pre, pre_mean, pre_rstd;  // tokens before norm_pre (pre_norm only)
    // patch_norm: the patches normed and the projection's output normed (the tokens read pe_ln).
    Tensor cols_ln, cols_mean, cols_rstd, pe_ln, pe_mean, pe_rstd;
    Tensor dpe_raw, dcols_ln;  // their gradients (the patches themselves take none)
    // `norm` over every token before avg pooling (no fc_norm) or the attention pool.
    Tensor lnf, lnf_mean, lnf_rstd;
    PoolActs pool;
    std::vector<BlockActs> blocks;
    // The class-token tail: the last block after its attention, for the Q = head_tokens() rows
    // the head reads of each sample (probs [B,H,Q,T], ao, r1, out [B,Q,C], ...); its norm1 and
    // qkv stay in blocks.back() (training) or blocks[0] (inference). xcls: the block's input,
    // those rows.
    BlockActs last;
    Tensor xcls;
    // Gradient buffers (training only); dxcls: the residual stream's gradient in the tail.
    // dlogits_half: each head's share of the logits' gradient (head_dist only).
    Tensor dlogits_half, dpooled_ln, dpooled, dx, dbranch, dact, dln, dao, dqkv, dpe, dxcls;
    // The masks of the last forward on these activations ([B,N] and [B,T], copied from the
    // caller): backward pools with the training forward's, whatever infer ran in between.
    bool have_mask = false;
    std::vector<uint8_t> patch_mask, key_mask;
  };

  // How block l runs: norm1 and qkv on every row (a), then what follows the attention on Tq
  // rows per sample (t): every row, or in the class-token tail (use_cls_tail, unless
  // every_row) the class token's alone, in A.last.
  struct BlockPlan {
    BlockActs& a;
    BlockActs& t;
    int64_t Tq;
    bool cls_only;
  };
  BlockPlan plan(Acts& A, int64_t l, bool every_row) const;

  // A shard of owner: binds the parameters owner binds (its own, or a replica's owner's), has
  // its own gradients and activations.
  struct ShardTag {};
  ViT(const ViT& owner, ShardTag);
  ViT& shard(int r) { return r == 0 ? *this : *shards_[size_t(r - 1)]; }
  // Runs f(r, shard(r), lo, hi) for each of R row shards of B, one shard per thread.
  template <typename F>
  void for_shards(int R, int64_t B, F&& f);
  Tensor forward_local(const float* images, int64_t B, const uint8_t* mask, const ForwardMode& mode);
  void backward_split(const Tensor& dlogits, const Tensor* ddist);  // backward's two forms
  // ddist: the distillation head's gradient after a distilling forward, else null.
  void backward_local(const Tensor& dlogits, const Tensor* ddist = nullptr);
  bool distilling() const { return last_mode_.distill && cfg_.head_dist; }
  // What one inference writes (null: not wanted), each [B, ...] from row 0.
  struct InferOut {
    float *logits = nullptr, *attn = nullptr, *pooled = nullptr, *tokens = nullptr, *pool_attn = nullptr;
    const std::vector<float*>* blocks = nullptr;  // infer_blocks'
  };
  void infer_all(const float* images, int64_t B, const uint8_t* mask, const InferOut& out);
  void infer_local(const float* images, int64_t B, const uint8_t* mask, const InferOut& out);

  // The linear layers' weights as prepared for the products (ops::prepare_linear,
  // precision.cpp): the blocks' for inference (fp32, packed fp32, bf16 or int8:
  // set_infer_dtype, pack_weights) and for training (fp32 or amp: set_amp); patch embedding,
  // heads and the attention pool always fp32.
  struct BlockLinears {
    ops::LinearWeights qkv, proj, fc1, fc2;
  };
  struct PoolLinears {
    ops::LinearWeights q, kv, proj, fc1, fc2;
  };
  struct Linears {
    std::vector<BlockLinears> infer, train;
    ops::LinearWeights patch, head, head_dist;
    PoolLinears pool;
  };
  // The prepared linears the products read: this model's, or a shard's owner's (owner_).
  const Linears& lin() const { return owner_->lin_; }
  // Block l's for activations A: training's (train_) or inference's.
  const BlockLinears& block_lin(const Acts& A, int64_t l) const;

  // The dropout and drop-path draws of one forward or backward of B samples: the rates (0
  // outside training), each site's key, and each tensor's first element in the step's whole
  // batch (masks are indexed over the whole batch, so a part of it draws the same bits).
  struct Draws {
    const ForwardMode& mode;
    int64_t B;
    int64_t s0 = mode.first_sample;  // the first sample's index in the whole batch
    float rate(float r) const { return mode.train ? r : 0.f; }
    uint64_t key(uint64_t site) const { return rng_key(mode.seed, mode.step, site); }
    int64_t first(const Tensor& t) const { return mode.first_sample * (t.numel() / B); }
  };

  Weights bind(float* base);
  // Rows of head input k (0: class token, 1: distillation token) in a [head_tokens * B, C] tensor.
  Tensor head_rows(const Tensor& t, int64_t k) const;
  // The head on A.pooled_ln into A.logits (and A.logits_dist), and its backward into
  // A.dpooled_ln (head.cpp). ddist: as backward_local's.
  void head_forward(Acts& A, const ForwardMode& mode);
  void head_backward(Acts& A, const Tensor& dlogits, const Tensor* ddist);
  void bind_linears();  // lin_.patch, lin_.head, lin_.head_dist, lin_.infer, lin_.train on W_, as fp32
  // Lays out activations for batch B in arena (one block when !training).
  void layout(Acts& A, Arena& arena, int64_t B, bool training, bool amp = false);
  // Points A's tensors into base (sizes only when base is null); returns the floats used.
  static int64_t carve(const ViTConfig& cfg, Acts& A, float* base, int64_t B, bool training, bool amp,
                       bool tail);

  void round_weights_bf16();  // amp: lin_.train's bf16 copies (into amp_store_)
  // attn: null, or where each layer's probabilities are copied ([depth, B, H, T, T]).
  // every_row: the last block on every row (no class-token tail), for its tokens.
  // pool_attn: null, or where the attention pool's probabilities go ([B, H, T]).
  // blocks: null, or per block null or where its output goes ([B, T, C]; with every_row).
  void run_forward(Acts& A, const float* images, const uint8_t* mask, const ForwardMode& mode,
                   float* attn = nullptr, bool every_row = false, float* pool_attn = nullptr,
                   const std::vector<float*>* blocks = nullptr);
  void set_masks(Acts& A, const uint8_t* mask) const;
  void set_weights_packed(bool packed);  // pack or unpack the blocks' four weights in place
  // Block i's four products prepared for precision p (lin_.infer), their fp32 matrices
  // released with release_fp32.
  void prepare_block(size_t i, Precision p, bool release_fp32);
  bool norm_all_tokens() const { return cfg_.norm_all_tokens(); }
  // The attention pool on A.lnf into A.pooled_ln, and its backward from A.dpooled_ln into A.dln.
  // pool_attn: null, or where the pool's probabilities are copied ([B, H, T]; zeros on the
  // prefix tokens, which timm 1.0's pool leaves out unless pool_include_prefix).
  void attn_pool_forward(Acts& A, bool training, float* pool_attn);
  void attn_pool_backward(Acts& A);
  // The mask pooling reads: the patches' (the tokens' with pool_include_prefix), or null.
  const uint8_t* pool_mask(const Acts& A) const;

  ViTConfig cfg_;
  ParamTable table_;
  Arena params_, grads_, acts_, infer_acts_;
  Weights W_, G_;
  Acts train_, infer_;
  ForwardMode last_mode_;
  std::string infer_dtype_ = "fp32";
  Linears lin_;
  const ViT* owner_ = this;  // whose parameters this one binds: itself, or a shard's or replica's owner
  bool amp_ = false;
  Arena amp_store_;  // amp: lin_.train's bf16 weights, two per float
  bool backbone_frozen_ = false;
  bool weights_packed_ = false;
  bool fp32_released_ = false;   // set_infer_dtype("bf16"/"int8", true): the blocks' fp32 matrices are gone
  int64_t released_blocks_ = 0;  // prepare_next_infer_block's, in released_dtype_, until set_infer_dtype
  std::string released_dtype_;
  int shards_wanted_ = 0;                     // set_shards
  bool cls_tail_wanted_ = true;               // set_cls_tail
  int split_ = 1;                             // shards of the last training forward
  std::vector<std::unique_ptr<ViT>> shards_;  // shards 1..; shard 0 is this model
  Arena split_logits_;   // [B,K] gathered from the shards; distilling, the distillation head's after
  int64_t split_B_ = 0;  // the last forward's batch
  std::vector<float> token_stats_;  // infer_features' tokens: their norm's mean and rstd
};

}  // namespace vit
