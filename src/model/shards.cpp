// Data-parallel shards: forward, backward and infer cut a batch into row shards, one per
// thread, each run by a shard model (a ViT binding this model's parameters, with its own
// activations and gradients) on one thread; the shards' gradients are summed in order.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/settings.h"
#include "core/threads.h"
#include "model/vit.h"
#include "ops/ops.h"

namespace vit {

namespace {
int shards_from_env() {
  static const int n = int(setting_count("VIT_SHARDS").value_or(0));
  return n;
}

// The least forward work (FLOPs, as run: forward_flops with the class-token tail) an
// inference shard is given when the count is automatic. An inference's shards are its one
// parallel region, and waking the other threads for it can cost more than the work: with
// mnist-seed (0.19 MFLOP an image as run) 2 shards win from 16 images (1.5 MFLOP a shard),
// cifar-seed (0.73 GFLOP an image) from 2. Training keeps its shards at any batch: its many
// parallel regions keep the threads awake (docs/design.md, "Fast kernels and threads").
constexpr double kMinInferShardFlop = 1.5e6;
// The least forward work of one image for which the images of a batch that would make its
// shards uneven run after them on every thread (ViT::infer_rest).
constexpr double kMinRestImageFlop = 5e7;
}  // namespace

int ViT::shards_for(int64_t B) const {
  if (in_parallel()) return 1;  // called from a shard or another parallel region
  const int from_env = shards_from_env();
  const int64_t n = shards_wanted_ > 0 ? shards_wanted_ : from_env > 0 ? from_env : num_threads();
  return int(std::clamp<int64_t>(n, 1, B));
}

bool ViT::shard_count_asked() const {
  return shards_wanted_ > 0 || shards_from_env() > 0;
}

int ViT::infer_shards(int64_t B) const {
  // Packed weights serve small batches and bf16 the big models: those run as one shard.
  if (weights_packed_ || infer_dtype_ != "fp32") return 1;
  const int R = shards_for(B);
  if (R <= 1 || shard_count_asked()) return R;  // a count asked for is kept
  const double work = double(forward_flops(cfg_, use_cls_tail())) * double(B);
  return int(std::clamp(std::floor(work / kMinInferShardFlop), 1.0, double(R)));
}

int64_t ViT::infer_rest(int64_t B, int R) const {
  if (R <= 1 || shard_count_asked()) return 0;  // a count asked for is kept
  // The pass of the rest costs its own start (mnist-seed at batch 17: ~27 us, 20% of the
  // batch), more than an image of a small model costs the waiting threads.
  if (double(forward_flops(cfg_, use_cls_tail())) < kMinRestImageFlop) return 0;
  const int64_t rest = B % R;
  return 2 * rest <= R ? rest : 0;
}

template <typename F>
void ViT::for_shards(int R, int64_t B, F&& f) {
  while (int(shards_.size()) < R - 1) shards_.push_back(std::unique_ptr<ViT>(new ViT(*this, ShardTag{})));
  for (int r = 1; r < R; ++r) {  // the shards run as this model would
    ViT& m = shard(r);
    m.weights_packed_ = weights_packed_;
    m.backbone_frozen_ = backbone_frozen_;
    m.amp_ = amp_;  // the prepared weights are this model's (owner_)
    m.cls_tail_wanted_ = cls_tail_wanted_;
  }
  run_on_threads(R, [&](int r) { f(shard(r), B * r / R, B * (r + 1) / R); });
}

Tensor ViT::forward(const float* images, int64_t B, const uint8_t* mask, const ForwardMode& mode) {
  VIT_CHECK(B > 0, "forward: batch size must be positive");
  VIT_CHECK(!is_replica(), "forward: a replica (ViT::replica) only infers; train the model it replicates");
  VIT_CHECK(!weights_packed_,
            "forward: the weights are packed for inference (pack_weights); unpack them to train");
  VIT_CHECK(!fp32_released_, "forward: the fp32 block weights were released for ", infer_dtype_,
            " inference; load the "
            "weights again to train");
  VIT_CHECK(has_head(),
            "forward: the model has no classifier head (num_classes 0); give it one to train "
            "(--num-classes K)");
  if (amp_) round_weights_bf16();
  split_ = shards_for(B);
  split_B_ = B;
  if (split_ == 1) return forward_local(images, B, mask, mode);
  const int64_t K = cfg_.num_classes, N = cfg_.num_patches(), img = cfg_.in_chans * cfg_.img_h * cfg_.img_w;
  const bool distill = mode.distill && cfg_.head_dist;
  split_logits_.resize(size_t((distill ? 2 : 1) * B * K));
  for_shards(split_, B, [&](ViT& m, int64_t lo, int64_t hi) {
    ForwardMode shard = mode;
    shard.first_sample += lo;
    const Tensor y = m.forward_local(images + lo * img, hi - lo, mask ? mask + lo * N : nullptr, shard);
    ops::copy(Tensor(split_logits_.data() + lo * K, {hi - lo, K}), y);
    if (distill) ops::copy(Tensor(split_logits_.data() + (B + lo) * K, {hi - lo, K}), m.train_.logits_dist);
  });
  return Tensor(split_logits_.data(), {B, K});
}

Tensor ViT::dist_logits() {
  VIT_CHECK(distilling(),
            "dist_logits: the last forward was not a distilling one (ForwardMode::distill on a "
            "model with head_dist)");
  if (split_ == 1) return train_.logits_dist;
  const int64_t B = split_B_, K = cfg_.num_classes;
  return Tensor(split_logits_.data() + B * K, {B, K});
}

Tensor ViT::forward_local(const float* images, int64_t B, const uint8_t* mask, const ForwardMode& mode) {
  if (train_.B != B || train_.amp != amp_ || train_.tail != use_cls_tail())
    layout(train_, acts_, B, true, amp_);
  last_mode_ = mode;
  run_forward(train_, images, mask, mode);
  return train_.logits;
}

void ViT::infer(const float* images, int64_t B, const uint8_t* mask, float* logits) {
  infer(images, B, mask, logits, nullptr);
}

void ViT::infer(const float* images, int64_t B, const uint8_t* mask, float* logits, float* attn) {
  infer(images, B, mask, logits, attn, nullptr);
}

void ViT::infer(const float* images, int64_t B, const uint8_t* mask, float* logits, float* attn,
                float* pool_attn) {
  // Without a head only the attention maps can be asked for (logits null).
  VIT_CHECK(has_head() || (!logits && (attn || pool_attn)),
            "infer: the model has no classifier head (num_classes 0): it gives features (vit predict "
            "--features), or fine-tune it with a new head (--num-classes K)");
  VIT_CHECK(!pool_attn || cfg_.map_pool(), "infer: the model has no attention pool (global_pool 'map')");
  infer_all(images, B, mask, {logits, attn, nullptr, nullptr, pool_attn});
}

void ViT::infer_features(const float* images, int64_t B, const uint8_t* mask, float* pooled, float* tokens) {
  infer_all(images, B, mask, {nullptr, nullptr, pooled, tokens});
}

void ViT::infer_blocks(const float* images, int64_t B, const uint8_t* mask, const std::vector<float*>& blocks,
                       float* tokens) {
  VIT_CHECK(int64_t(blocks.size()) == cfg_.depth, "infer_blocks: ", blocks.size(), " outputs for ",
            cfg_.depth, " blocks");
  InferOut out;
  out.tokens = tokens;
  out.blocks = &blocks;
  infer_all(images, B, mask, out);
}

void ViT::infer_all(const float* images, int64_t B, const uint8_t* mask, const InferOut& out) {
  VIT_CHECK(B > 0, "infer: batch size must be positive");
  VIT_CHECK(released_blocks_ == 0, "infer: a load left ", released_blocks_, " blocks in ", released_dtype_,
            " and the rest in fp32 (ViT::prepare_next_infer_block without set_infer_dtype)");
  // Attention maps and block outputs are written per layer by one model: one shard.
  const int R = out.attn || out.pool_attn || out.blocks ? 1 : infer_shards(B);
  if (R == 1) return infer_local(images, B, mask, out);
  const int64_t K = cfg_.num_classes, N = cfg_.num_patches(), img = cfg_.in_chans * cfg_.img_h * cfg_.img_w;
  const int64_t D = cfg_.embed_dim, TD = cfg_.num_tokens() * D;
  auto at = [](float* p, int64_t off) { return p ? p + off : nullptr; };
  auto run = [&](ViT& m, int64_t lo, int64_t hi) {
    m.infer_local(images + lo * img, hi - lo, mask ? mask + lo * N : nullptr,
                  {at(out.logits, lo * K), nullptr, at(out.pooled, lo * D), at(out.tokens, lo * TD)});
  };
  const int64_t rest = infer_rest(B, R);
  for_shards(R, B - rest, run);
  if (rest > 0) run(*this, B - rest, B);  // on every thread, split per operation
}

void ViT::infer_local(const float* images, int64_t B, const uint8_t* mask, const InferOut& out) {
  if (infer_.B != B || infer_.tail != use_cls_tail()) layout(infer_, infer_acts_, B, false);
  run_forward(infer_, images, mask, ForwardMode{}, out.attn, /*every_row=*/out.tokens || out.blocks,
              out.pool_attn, out.blocks);
  const int64_t T = cfg_.num_tokens(), D = cfg_.embed_dim;
  if (out.logits) ops::copy(Tensor(out.logits, {B, cfg_.num_classes}), infer_.logits);
  if (out.pooled) {  // timm's pre_logits: with head_dist the mean of the two normed tokens
    const Tensor pooled(out.pooled, {B, D});
    if (cfg_.head_dist)
      ops::mean_of_two(pooled, head_rows(infer_.pooled_ln, 0), head_rows(infer_.pooled_ln, 1));
    else
      ops::copy(pooled, infer_.pooled_ln);
  }
  if (!out.tokens) return;
  // The last block's output, every row; timm's forward_features ends with `norm` (the
  // identity with fc_norm, whose norm comes after pooling).
  const Tensor x = reshape(plan(infer_, cfg_.depth - 1, true).t.out, {B * T, D});
  const Tensor tokens(out.tokens, {B * T, D});
  if (cfg_.use_fc_norm()) return ops::copy(tokens, x);
  if (norm_all_tokens()) return ops::copy(tokens, infer_.lnf);  // the forward normed every token already
  token_stats_.resize(size_t(2 * B * T));  // grows to the largest batch once, then reused
  float* stats = token_stats_.data();
  ops::layernorm_forward(tokens, Tensor(stats, {B * T}), Tensor(stats + B * T, {B * T}), x, W_.norm_w,
                         W_.norm_b, cfg_.norm_eps);
}

void ViT::backward(const Tensor& dlogits) {
  backward_split(dlogits, nullptr);
}

void ViT::backward(const Tensor& dlogits, const Tensor& ddist) {
  backward_split(dlogits, &ddist);
}

void ViT::backward_split(const Tensor& dlogits, const Tensor* ddist) {
  VIT_CHECK(!weights_packed_, "backward: the weights are packed for inference (pack_weights)");
  VIT_CHECK(!fp32_released_, "backward: the fp32 block weights were released for ", infer_dtype_,
            " inference");
  if (split_ == 1) return backward_local(dlogits, ddist);
  const int64_t K = cfg_.num_classes;
  int64_t B = 0;
  for (int r = 0; r < split_; ++r) B += shard(r).train_.B;
  check_shape(dlogits, {B, K}, "backward: grad logits");
  if (ddist) check_shape(*ddist, {B, K}, "backward: grad distillation logits");
  // The gradients this backward touches: all, or the head's alone when the backbone is frozen.
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [offset, end) in the arena
  if (backbone_frozen_) {
    for (const ParamSpec& p : table_.specs())
      if (is_head_param(p.name)) ranges.push_back({p.offset, p.offset + p.numel()});
  } else {
    ranges.push_back({0, int64_t(table_.total())});
  }
  for_shards(split_, B, [&](ViT& m, int64_t lo, int64_t hi) {
    if (&m != this)  // shard 0 accumulates into this model's gradients, the others start at 0
      for (auto [a, e] : ranges) ops::fill(Tensor(m.grads_.data() + a, {e - a}), 0.f);
    const Tensor dd = ddist ? Tensor(ddist->data + lo * K, {hi - lo, K}) : Tensor();
    m.backward_local(Tensor(dlogits.data + lo * K, {hi - lo, K}), ddist ? &dd : nullptr);
  });
  // Sum the shards' gradients into this model's, shard by shard in order (the same bits every
  // time), each thread a slice of the arena.
  const int R = split_;
  run_on_threads(R, [&](int t) {
    for (auto [a, e] : ranges) {
      const int64_t lo = a + (e - a) * t / R, hi = a + (e - a) * (t + 1) / R;
      for (int r = 1; r < R; ++r)
        ops::add_into(Tensor(grads_.data() + lo, {hi - lo}), Tensor(shard(r).grads_.data() + lo, {hi - lo}));
    }
  });
}

ViT::ViT(const ViT& owner, ShardTag) : cfg_(owner.cfg_), table_(owner.table_), owner_(owner.owner_) {
  grads_.resize(table_.total());  // mapped: costs memory only once a backward writes it
  W_ = bind(const_cast<float*>(owner_->params_.data()));
  G_ = bind(grads_.data());
}

std::unique_ptr<ViT> ViT::replica() const {
  std::unique_ptr<ViT> r(new ViT(*this, ShardTag{}));
  r->infer_dtype_ = infer_dtype_;
  r->fp32_released_ = fp32_released_;
  r->weights_packed_ = weights_packed_;
  r->cls_tail_wanted_ = cls_tail_wanted_;
  r->shards_wanted_ = shards_wanted_;
  return r;
}

}  // namespace vit
