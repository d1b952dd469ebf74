#include "model/vit.h"
#include "core/settings.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/rng.h"
#include "core/threads.h"
#include "ops/ops.h"
#include "vit/core/error.h"

namespace vit {

namespace {

// Dropout sites: each gets its own key per step, so masks never repeat across sites.
enum : uint64_t { kSitePos = 1, kSiteHead = 2 };
enum BlockSite : uint64_t { kAttnDrop, kProjDrop, kPath1, kMlpDrop1, kMlpDrop2, kPath2 };
uint64_t block_site(int64_t layer, BlockSite s) {
  return 16 + uint64_t(layer) * 8 + s;
}

}  // namespace

ViT::ViT(const ViTConfig& cfg, bool randomize) : cfg_(cfg), table_(cfg) {
  check_settings();  // a bad VIT_* value stops here, not in a kernel's parallel region
  params_.resize(table_.total());
  grads_.resize(table_.total());
  W_ = bind(params_.data());
  G_ = bind(grads_.data());
  bind_linears();
  if (randomize) init_weights(0);
}

ViT::BlockPlan ViT::plan(Acts& A, int64_t l, bool every_row) const {
  BlockActs& a = A.blocks[size_t(l) < A.blocks.size() ? l : 0];  // inference reuses one block's
  const bool cls_only = A.tail && !every_row && l + 1 == cfg_.depth;
  return {a, cls_only ? A.last : a, cls_only ? cfg_.head_tokens() : cfg_.num_tokens(), cls_only};
}

ViT::ViT(const ViT& owner, ShardTag) : cfg_(owner.cfg_), table_(owner.table_), owner_(&owner) {
  grads_.resize(table_.total());  // mapped: costs memory only once a backward writes it
  W_ = bind(const_cast<float*>(owner.params_.data()));
  G_ = bind(grads_.data());
}

Tensor ViT::param(const std::string& name) {
  const auto& s = table_.at(name);
  return Tensor(params_.data() + s.offset, s.shape);
}

Tensor ViT::grad(const std::string& name) {
  const auto& s = table_.at(name);
  return Tensor(grads_.data() + s.offset, s.shape);
}

void ViT::init_weights(uint64_t seed) {
  init_params(table_, cfg_, params_.data(), seed);
}

ViT::Weights ViT::bind(float* base) {
  auto t = [&](const std::string& name) {
    const ParamSpec* s = table_.find(name);
    return s ? Tensor(base + s->offset, s->shape) : Tensor();
  };
  Weights w;
  const int64_t D = cfg_.embed_dim;
  w.patch_w = reshape(t("patch_embed.proj.weight"), {D, cfg_.patch_dim()});
  w.patch_b = t("patch_embed.proj.bias");
  w.pin_w = t("patch_embed.norm_in.weight");
  w.pin_b = t("patch_embed.norm_in.bias");
  w.pout_w = t("patch_embed.norm.weight");
  w.pout_b = t("patch_embed.norm.bias");
  w.cls = t("cls_token");
  w.reg = t(cfg_.dist_token ? "dist_token" : "reg_token");
  w.pos = t("pos_embed");
  w.pre_w = t("norm_pre.weight");
  w.pre_b = t("norm_pre.bias");
  const std::string norm = cfg_.use_fc_norm() ? "fc_norm" : "norm";
  w.norm_w = t(norm + ".weight");
  w.norm_b = t(norm + ".bias");
  w.head_w = t("head.weight");
  w.head_b = t("head.bias");
  w.head_dist_w = t("head_dist.weight");
  w.head_dist_b = t("head_dist.bias");
  w.pool = {t("attn_pool.latent"),         t("attn_pool.q.weight"),     t("attn_pool.q.bias"),
            t("attn_pool.kv.weight"),      t("attn_pool.kv.bias"),      t("attn_pool.proj.weight"),
            t("attn_pool.proj.bias"),      t("attn_pool.norm.weight"),  t("attn_pool.norm.bias"),
            t("attn_pool.mlp.fc1.weight"), t("attn_pool.mlp.fc1.bias"), t("attn_pool.mlp.fc2.weight"),
            t("attn_pool.mlp.fc2.bias")};
  for (int64_t i = 0; i < cfg_.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    w.blocks.push_back({t(p + "norm1.weight"), t(p + "norm1.bias"), t(p + "attn.qkv.weight"),
                        t(p + "attn.qkv.bias"), t(p + "attn.proj.weight"), t(p + "attn.proj.bias"),
                        t(p + "ls1.gamma"), t(p + "norm2.weight"), t(p + "norm2.bias"),
                        t(p + "mlp.fc1.weight"), t(p + "mlp.fc1.bias"), t(p + "mlp.fc2.weight"),
                        t(p + "mlp.fc2.bias"), t(p + "ls2.gamma")});
  }
  return w;
}

void ViT::bind_linears() {
  patch_lin_ = {W_.patch_w, W_.patch_b};
  head_lin_ = {W_.head_w, W_.head_b};
  head_dist_lin_ = {W_.head_dist_w, W_.head_dist_b};
  const PoolWeights& p = W_.pool;
  pool_lin_ = {{p.qw, p.qb}, {p.kvw, p.kvb}, {p.projw, p.projb}, {p.fc1w, p.fc1b}, {p.fc2w, p.fc2b}};
  infer_lin_.clear();
  for (const BlockWeights& w : W_.blocks)
    infer_lin_.push_back({{w.qkvw, w.qkvb}, {w.projw, w.projb}, {w.fc1w, w.fc1b}, {w.fc2w, w.fc2b}});
  train_lin_ = infer_lin_;
}

namespace {
// The optional tensors of the table: a pointer to the view, or null when absent.
const Tensor* opt(const Tensor& t) {
  return t.data ? &t : nullptr;
}
Tensor* opt(Tensor& t) {
  return t.data ? &t : nullptr;
}

// The attention pool's probabilities over the tokens it reads, R rows of T - first in `from`,
// as R rows of T in `to` with zeros in the first `first` columns (the tokens it leaves out).
// `to` may be `from`: the rows move back to front, each to a place at or after its own.
void spread_pool_probs(float* to, const float* from, int64_t R, int64_t T, int64_t first) {
  const int64_t K = T - first;
  for (int64_t r = R - 1; r >= 0; --r) {
    std::memmove(to + r * T + first, from + r * K, size_t(K) * sizeof(float));
    std::fill(to + r * T, to + r * T + first, 0.f);
  }
}
}  // namespace

const uint8_t* ViT::pool_mask() const {
  if (!have_mask_) return nullptr;
  // [B, N] for the patches; [B, T] (prefix tokens visible) when the mean takes them too.
  return cfg_.pool_include_prefix ? key_mask_.data() : patch_mask_.data();
}

bool ViT::cls_tail_applies(const ViTConfig& cfg) {
  static const bool off = setting_choice("VIT_CLS_TAIL") == "off";
  return !off && cfg.class_token && cfg.global_pool == "token" && cfg.depth > 0;
}

bool ViT::use_cls_tail() const {
  return cls_tail_wanted_ && cls_tail_applies(cfg_);
}

void ViT::set_masks(int64_t B, const uint8_t* mask) {
  have_mask_ = mask != nullptr;
  if (!mask) return;
  const int64_t N = cfg_.num_patches(), T = cfg_.num_tokens(), pre = cfg_.num_prefix_tokens();
  patch_mask_.assign(mask, mask + B * N);
  key_mask_.assign(B * T, 1);  // the class token is always visible
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n) key_mask_[b * T + pre + n] = mask[b * N + n] ? 1 : 0;
}

void ViT::run_forward(Acts& A, const float* images, const uint8_t* mask, const ForwardMode& mode, float* attn,
                      bool every_row, float* pool_attn, const std::vector<float*>* blocks) {
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim, I = cfg_.attn_dim();
  auto rate = [&](float r) { return mode.train ? r : 0.f; };
  auto key = [&](uint64_t site) { return rng_key(mode.seed, mode.step, site); };
  // Index of t's first element in the global batch (t's leading dims hold B samples).
  auto first = [&](const Tensor& t) { return mode.first_sample * (t.numel() / B); };
  const int64_t s0 = mode.first_sample;
  set_masks(B, mask);
  const uint8_t* keys_mask = have_mask_ ? key_mask_.data() : nullptr;

  Tensor img(const_cast<float*>(images), {B, cfg_.in_chans, cfg_.img_h, cfg_.img_w});
  ops::im2col_patches(A.cols, img, cfg_.patch_h, cfg_.patch_w);
  if (cfg_.patch_norm) {  // vit-pytorch: LayerNorm, projection, LayerNorm
    ops::layernorm_forward(A.cols_ln, A.cols_mean, A.cols_rstd, A.cols, W_.pin_w, W_.pin_b, cfg_.norm_eps);
    ops::linear_forward(A.pe, A.cols_ln, owner_->patch_lin_);
    ops::layernorm_forward(A.pe_ln, A.pe_mean, A.pe_rstd, A.pe, W_.pout_w, W_.pout_b, cfg_.norm_eps);
  } else {
    ops::linear_forward(A.pe, A.cols, owner_->patch_lin_);
  }
  const Tensor tokens = cfg_.pre_norm ? A.x_pre : A.x0;
  ops::tokens_forward(tokens, cfg_.patch_norm ? A.pe_ln : A.pe, opt(W_.cls), opt(W_.reg), W_.pos);
  ops::dropout_forward(tokens, rate(cfg_.pos_drop_rate), key(kSitePos), first(tokens));
  if (cfg_.pre_norm)
    ops::layernorm_forward(reshape(A.x0, {B * T, C}), A.pre_mean, A.pre_rstd, reshape(A.x_pre, {B * T, C}),
                           W_.pre_w, W_.pre_b, cfg_.norm_eps);

  Tensor x = A.x0;
  for (int64_t l = 0; l < cfg_.depth; ++l) {
    // Attention maps need every row: the class-token tail runs only without them.
    const BlockPlan p = plan(A, l, every_row || attn != nullptr);
    BlockActs &a = p.a, &t = p.t;
    const int64_t Tq = p.Tq;
    const BlockWeights& w = W_.blocks[l];
    const float proj_p = rate(cfg_.proj_drop_rate), path_p = rate(cfg_.drop_path_at(l));
    const float attn_p = rate(cfg_.attn_drop_rate);
    // With LayerScale, training keeps each branch for the gammas' gradients.
    const Tensor br1 = t.br1.data ? t.br1 : Tensor(A.branch.data, {B * Tq, C});
    const Tensor br2 = t.br2.data ? t.br2 : Tensor(A.branch.data, {B * Tq, C});
    if (l == 0)  // later blocks' ln1 comes with the residual sum that ends the block before
      ops::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, reshape(x, {B * T, C}), w.n1w, w.n1b,
                             cfg_.norm_eps);
    // The block's products on its weights as prepared for training (fp32 or amp) or
    // inference (fp32, packed or bf16); amp keeps each product's input in bf16 (a.ln1_b, ...).
    const BlockLinears& lw = (&A == &train_ ? owner_->train_lin_ : owner_->infer_lin_)[size_t(l)];
    ops::linear_forward(reshape(a.qkv, {B * T, 3 * I}), a.ln1, lw.qkv, ops::Epilogue::none, a.ln1_b);
    if (p.cls_only) {
      ops::attention_cls_forward(t.ao, t.probs, attn_p > 0.f ? &t.probs_drop : nullptr, a.qkv, keys_mask,
                                 attn_p, key(block_site(l, kAttnDrop)), s0);
      ops::first_tokens(A.xcls, x);  // the rows of x the head reads (class, distillation token)
      x = A.xcls;
    } else {
      float* maps = attn ? attn + l * a.probs.numel() : nullptr;  // this layer's attention maps
      const Tensor probs = maps && !a.probs.data ? Tensor(maps, a.probs.shape) : a.probs;
      ops::attention_forward(a.ao, probs, attn_p > 0.f ? &a.probs_drop : nullptr, a.qkv, keys_mask, attn_p,
                             key(block_site(l, kAttnDrop)), s0);
      if (maps && probs.data != maps) ops::copy(Tensor(maps, probs.shape), probs);
    }
    ops::linear_forward(br1, reshape(t.ao, {B * Tq, I}), lw.proj, ops::Epilogue::none, t.ao_b);
    // r1 = x + branch and its LayerNorm in one walk over the samples.
    ops::residual_layernorm_forward(t.r1, x, reshape(br1, {B, Tq, C}), opt(w.ls1), proj_p,
                                    key(block_site(l, kProjDrop)), path_p, key(block_site(l, kPath1)), s0,
                                    {t.ln2, t.ln2_mean, t.ln2_rstd, w.n2w, w.n2b, cfg_.norm_eps});
    // forward() (whose activations backward() reads, whatever the mode) keeps the
    // activation's derivative, infer() nothing.
    ops::mlp_forward(br2, t.ln2, lw.fc1, lw.fc2, t.mlp, &A == &train_,
                     {proj_p, key(block_site(l, kMlpDrop1)), first(t.mlp.act)}, cfg_.activation());
    if (l + 1 < cfg_.depth) {  // out = r1 + branch, and the next block's ln1 with it
      BlockActs& n = plan(A, l + 1, true).a;
      const BlockWeights& wn = W_.blocks[l + 1];
      ops::residual_layernorm_forward(t.out, t.r1, reshape(br2, {B, Tq, C}), opt(w.ls2), proj_p,
                                      key(block_site(l, kMlpDrop2)), path_p, key(block_site(l, kPath2)), s0,
                                      {n.ln1, n.ln1_mean, n.ln1_rstd, wn.n1w, wn.n1b, cfg_.norm_eps});
    } else {
      ops::residual_forward(t.out, t.r1, reshape(br2, {B, Tq, C}), opt(w.ls2), proj_p,
                            key(block_site(l, kMlpDrop2)), path_p, key(block_site(l, kPath2)), s0);
    }
    x = t.out;  // [B, Tq, C]
    if (blocks && (*blocks)[size_t(l)]) ops::copy(Tensor((*blocks)[size_t(l)], x.shape), x);
  }
  if (norm_all_tokens()) {
    // timm's `norm` before avg pooling (fc_norm off) or the attention pool: every token is
    // normed, then averaged or pooled by attention (over the visible tokens).
    ops::layernorm_forward(A.lnf, A.lnf_mean, A.lnf_rstd, reshape(x, {B * T, C}), W_.norm_w, W_.norm_b,
                           cfg_.norm_eps);
    if (cfg_.map_pool())
      attn_pool_forward(A, &A == &train_, pool_attn);
    else
      ops::pool_forward(A.pooled_ln, reshape(A.lnf, {B, T, C}), pool_mask(), true, cfg_.first_pooled());
  } else {
    // timm norms every token before token pooling; LayerNorm is per row, so norming the
    // pooled row alone gives the same numbers for a fraction of the work. With fc_norm
    // the norm comes after pooling anyway.
    // Token pooling takes row 0 (x is the class-token tail's [B,1,C] when that ran), and
    // with head_dist row 1 as well, into A.pooled's second half.
    ops::pool_forward(A.pooled, x, pool_mask(), cfg_.avg_pool(), cfg_.avg_pool() ? cfg_.first_pooled() : 0);
    ops::layernorm_forward(A.pooled_ln, A.pooled_mean, A.pooled_rstd, A.pooled, W_.norm_w, W_.norm_b,
                           cfg_.norm_eps);
  }
  ops::dropout_forward(A.pooled_ln, rate(cfg_.drop_rate), key(kSiteHead), first(A.pooled_ln));
  if (!has_head()) return;
  if (!cfg_.head_dist) return ops::linear_forward(A.logits, A.pooled_ln, owner_->head_lin_);
  // timm's VisionTransformerDistilled: (head(x_cls) + head_dist(x_dist)) / 2, or in
  // distillation training the two apart.
  const Tensor cls_ln = head_rows(A.pooled_ln, 0), dist_ln = head_rows(A.pooled_ln, 1);
  ops::linear_forward(A.logits, cls_ln, owner_->head_lin_);
  ops::linear_forward(A.logits_dist, dist_ln, owner_->head_dist_lin_);
  if (!mode.distill) ops::mean_of_two(A.logits, A.logits, A.logits_dist);
}

void ViT::attn_pool_forward(Acts& A, bool training, float* pool_attn) {
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim, first = cfg_.first_pooled();
  PoolActs& p = A.pool;
  const PoolLinears& lw = owner_->pool_lin_;
  // timm's AttentionPoolLatent: q = q(latent); k, v = kv(x); attention; proj; x + mlp(norm(x)).
  // timm 1.0 pools the patch tokens (the prefix tokens too with pool_include_prefix): kv runs
  // on every row, the attention reads rows first..T-1.
  ops::linear_forward(p.q, reshape(W_.pool.latent, {1, C}), lw.q);
  ops::linear_forward(p.kv, A.lnf, lw.kv);
  // Inference keeps no probabilities unless they are asked for (vit attention --method pool).
  const Tensor probs = pool_attn && !p.probs.data ? Tensor(pool_attn, p.probs.shape) : p.probs;
  ops::attention_pool_forward(p.ao, probs, p.q, reshape(p.kv, {B, T, 2 * C}), pool_mask(), first);
  if (pool_attn) spread_pool_probs(pool_attn, probs.data, B * cfg_.num_heads, T, first);
  ops::linear_forward(p.y, reshape(p.ao, {B, C}), lw.proj);
  ops::layernorm_forward(p.ln, p.ln_mean, p.ln_rstd, p.y, W_.pool.nw, W_.pool.nb, cfg_.norm_eps);
  ops::mlp_forward(p.branch, p.ln, lw.fc1, lw.fc2, p.mlp, training, {}, cfg_.activation());
  ops::copy(A.pooled_ln, p.y);
  ops::add_into(A.pooled_ln, p.branch);
}

void ViT::attn_pool_backward(Acts& A) {
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim;
  PoolActs& p = A.pool;
  const PoolLinears& lw = owner_->pool_lin_;
  PoolWeights& g = G_.pool;
  // pooled = y + mlp(norm(y)): y's gradient is the pooled one plus the branch's.
  ops::copy(p.dy, A.dpooled_ln);
  ops::mlp_backward(p.dln, p.dact, g.fc1w, g.fc1b, g.fc2w, &g.fc2b, A.dpooled_ln, p.ln, lw.fc1, lw.fc2, p.mlp,
                    {});
  ops::layernorm_backward(p.dy, g.nw, g.nb, p.dln, p.y, p.ln_mean, p.ln_rstd, W_.pool.nw, true);
  Tensor dao = reshape(p.dao, {B, C});
  ops::linear_backward(&dao, &g.projw, &g.projb, p.dy, reshape(p.ao, {B, C}), lw.proj);
  ops::attention_pool_backward(p.dq, reshape(p.dkv, {B, T, 2 * C}), p.dao, p.q, reshape(p.kv, {B, T, 2 * C}),
                               p.probs, cfg_.first_pooled());
  Tensor dln = reshape(A.dln, {B * T, C});
  ops::linear_backward(&dln, &g.kvw, &g.kvb, p.dkv, A.lnf, lw.kv);
  // Every sample's query is the latent's: its gradient is the sum over the batch, in order.
  ops::copy(p.dqsum, Tensor(p.dq.data, {1, C}));
  for (int64_t b = 1; b < B; ++b) ops::add_into(p.dqsum, Tensor(p.dq.data + b * C, {1, C}));
  Tensor dlatent = reshape(g.latent, {1, C});  // accumulated, as every parameter gradient
  ops::linear_backward(&dlatent, &g.qw, &g.qb, p.dqsum, reshape(W_.pool.latent, {1, C}), lw.q, nullptr, true);
}

Tensor ViT::head_rows(const Tensor& t, int64_t k) const {
  const int64_t B = t.dim(0) / cfg_.head_tokens(), C = t.dim(1);
  return Tensor(t.data + k * B * C, {B, C});
}

void ViT::backward_local(const Tensor& dlogits, const Tensor* ddist) {
  Acts& A = train_;
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim, I = cfg_.attn_dim();
  check_shape(dlogits, {B, cfg_.num_classes}, "backward: grad logits");
  const ForwardMode& mode = last_mode_;
  auto rate = [&](float r) { return mode.train ? r : 0.f; };
  auto key = [&](uint64_t site) { return rng_key(mode.seed, mode.step, site); };
  // Index of t's first element in the global batch (t's leading dims hold B samples).
  auto first = [&](const Tensor& t) { return mode.first_sample * (t.numel() / B); };
  const int64_t s0 = mode.first_sample;

  VIT_CHECK(!ddist || cfg_.head_dist, "backward: a gradient for a distillation head the model does not have");
  if (cfg_.head_dist) {
    // Distilling, each head has its own gradient; else each head's logits count half.
    VIT_CHECK(distilling() == (ddist != nullptr),
              "backward: a distilling forward takes a gradient for each head, any other one");
    if (ddist) {
      check_shape(*ddist, {B, cfg_.num_classes}, "backward: grad distillation logits");
    } else {
      ops::copy(A.dlogits_half, dlogits);
      ops::scale(A.dlogits_half, 0.5f);
    }
    const Tensor& dy_cls = ddist ? dlogits : A.dlogits_half;
    const Tensor& dy_dist = ddist ? *ddist : A.dlogits_half;
    Tensor dcls = head_rows(A.dpooled_ln, 0), dd = head_rows(A.dpooled_ln, 1);
    ops::linear_backward(&dcls, &G_.head_w, &G_.head_b, dy_cls, head_rows(A.pooled_ln, 0), owner_->head_lin_);
    ops::linear_backward(&dd, &G_.head_dist_w, &G_.head_dist_b, dy_dist, head_rows(A.pooled_ln, 1),
                         owner_->head_dist_lin_);
  } else {
    ops::linear_backward(&A.dpooled_ln, &G_.head_w, &G_.head_b, dlogits, A.pooled_ln, owner_->head_lin_);
  }
  if (backbone_frozen_) return;  // only the head trains: nothing below needs gradients
  ops::dropout_backward(A.dpooled_ln, rate(cfg_.drop_rate), key(kSiteHead), first(A.dpooled_ln));
  if (norm_all_tokens()) {
    if (cfg_.map_pool())
      attn_pool_backward(A);
    else
      ops::pool_backward(reshape(A.dln, {B, T, C}), A.dpooled_ln, pool_mask(), true, cfg_.first_pooled());
    ops::layernorm_backward(reshape(A.dx, {B * T, C}), G_.norm_w, G_.norm_b, A.dln,
                            reshape(A.blocks.back().out, {B * T, C}), A.lnf_mean, A.lnf_rstd, W_.norm_w,
                            false);
  } else {
    ops::layernorm_backward(A.dpooled, G_.norm_w, G_.norm_b, A.dpooled_ln, A.pooled, A.pooled_mean,
                            A.pooled_rstd, W_.norm_w, false);
    // The class-token tail (A.tail) holds the last block's class-token rows alone: A.dxcls.
    ops::pool_backward(A.tail ? A.dxcls : A.dx, A.dpooled, pool_mask(), cfg_.avg_pool(),
                       cfg_.avg_pool() ? cfg_.first_pooled() : 0);
  }

  // A.dx carries the gradient of the residual stream down through the blocks (A.dxcls
  // through the tail's rows).
  const int64_t M = cfg_.mlp_dim;
  // A branch that nothing scales (no dropout, drop path or LayerScale) has the residual
  // stream's gradient: the products read A.dx itself, which changes only after them.
  // ls: the branch's LayerScale gamma in block l.
  auto unscaled = [&](int64_t l, const Tensor& ls) {
    return rate(cfg_.proj_drop_rate) == 0.f && rate(cfg_.drop_path_at(l)) == 0.f && !ls.data;
  };
  // Bias gradients that come as the column sums of the residual stream's gradient where a
  // LayerNorm's backward writes it (layernorm_backward's dx_colsum): an unscaled branch's
  // output gradient is that gradient. proj's bias comes with norm2's backward in its own
  // block; fc2's with norm1's backward in the block above (block l-1's output is block l's
  // input), fc2b_by_norm1[l]; the top block's fc2 (fc2b_by_norm1[depth] null) sums its own.
  std::vector<Tensor*> fc2b_by_norm1(size_t(cfg_.depth) + 1, nullptr);
  for (int64_t l = 1; l < cfg_.depth; ++l)
    fc2b_by_norm1[size_t(l)] = unscaled(l - 1, W_.blocks[l - 1].ls2) ? &G_.blocks[l - 1].fc2b : nullptr;
  for (int64_t l = cfg_.depth - 1; l >= 0; --l) {
    // As in run_forward: in the class-token tail the rows after the attention are A.last's.
    const BlockPlan p = plan(A, l, false);
    BlockActs &a = p.a, &t = p.t;
    const int64_t Tq = p.Tq;
    const Tensor dxq = p.cls_only ? A.dxcls : A.dx;  // [B, Tq, C]
    const Tensor dx2d = reshape(dxq, {B * Tq, C});
    const Tensor dbranch(A.dbranch.data, {B * Tq, C}), dbranch3d(A.dbranch.data, {B, Tq, C});
    Tensor dact(A.dact.data, {B * Tq, M}), dlnq(A.dln.data, {B * Tq, C}), dao(A.dao.data, {B, Tq, I});
    const BlockWeights& w = W_.blocks[l];
    BlockWeights& g = G_.blocks[l];
    const Tensor x_in = reshape(l > 0 ? A.blocks[l - 1].out : A.x0, {B * T, C});
    const float proj_p = rate(cfg_.proj_drop_rate), path_p = rate(cfg_.drop_path_at(l));
    const float attn_p = rate(cfg_.attn_drop_rate);
    // MLP branch: out = r1 + branch. Drop path is per sample: the residual ops need the
    // [B,Tq,C] views.
    const Tensor br1 = t.br1.data ? reshape(t.br1, {B, Tq, C}) : Tensor{};
    const Tensor br2 = t.br2.data ? reshape(t.br2, {B, Tq, C}) : Tensor{};
    const bool plain2 = unscaled(l, w.ls2), plain1 = unscaled(l, w.ls1);
    if (!plain2)
      ops::residual_backward(dbranch3d, opt(g.ls2), dxq, opt(br2), opt(w.ls2), proj_p,
                             key(block_site(l, kMlpDrop2)), path_p, key(block_site(l, kPath2)), s0);
    // The products on the weights the forward used; amp reads the bf16 inputs it kept.
    const BlockLinears& lw = owner_->train_lin_[size_t(l)];
    ops::mlp_backward(dlnq, dact, g.fc1w, g.fc1b, g.fc2w, fc2b_by_norm1[size_t(l) + 1] ? nullptr : &g.fc2b,
                      plain2 ? dx2d : dbranch, t.ln2, lw.fc1, lw.fc2, t.mlp,
                      {proj_p, key(block_site(l, kMlpDrop1)), first(dact)});
    ops::layernorm_backward(dx2d, g.n2w, g.n2b, dlnq, reshape(t.r1, {B * Tq, C}), t.ln2_mean, t.ln2_rstd,
                            w.n2w, true, plain1 ? &g.projb : nullptr);
    // Attention branch: r1 = x + branch.
    if (!plain1)
      ops::residual_backward(dbranch3d, opt(g.ls1), dxq, opt(br1), opt(w.ls1), proj_p,
                             key(block_site(l, kProjDrop)), path_p, key(block_site(l, kPath1)), s0);
    Tensor dao2d = reshape(dao, {B * Tq, I});
    ops::linear_backward(&dao2d, &g.projw, plain1 ? nullptr : &g.projb, plain1 ? dx2d : dbranch,
                         reshape(t.ao, {B * Tq, I}), lw.proj, t.ao_b);
    if (p.cls_only) {
      ops::attention_cls_backward(A.dqkv, dao, a.qkv, t.probs, attn_p > 0.f ? &t.probs_drop : nullptr, attn_p,
                                  key(block_site(l, kAttnDrop)), s0);
      // The residual stream's gradient below the tail: the tail's rows, zeros elsewhere.
      ops::first_tokens_backward(A.dx, A.dxcls);
    } else {
      ops::attention_backward(A.dqkv, A.dao, a.qkv, a.probs, attn_p > 0.f ? &a.probs_drop : nullptr, attn_p,
                              key(block_site(l, kAttnDrop)), s0);
    }
    ops::linear_backward(&A.dln, &g.qkvw, opt(g.qkvb), reshape(A.dqkv, {B * T, 3 * I}), a.ln1, lw.qkv,
                         a.ln1_b);
    ops::layernorm_backward(reshape(A.dx, {B * T, C}), g.n1w, g.n1b, A.dln, x_in, a.ln1_mean, a.ln1_rstd,
                            w.n1w, true, fc2b_by_norm1[size_t(l)]);
  }
  const Tensor dx2d = reshape(A.dx, {B * T, C}), dbranch3d = reshape(A.dbranch, {B, T, C});
  if (cfg_.pre_norm) {
    // dx holds the gradient of norm_pre's output; the tokens' gradient goes to dbranch.
    ops::layernorm_backward(A.dbranch, G_.pre_w, G_.pre_b, dx2d, reshape(A.x_pre, {B * T, C}), A.pre_mean,
                            A.pre_rstd, W_.pre_w, false);
  }
  const Tensor dtokens = cfg_.pre_norm ? dbranch3d : A.dx;
  ops::dropout_backward(dtokens, rate(cfg_.pos_drop_rate), key(kSitePos), first(dtokens));
  const bool learn_pos = cfg_.pos_embed == "learn";
  ops::tokens_backward(A.dpe, opt(G_.cls), opt(G_.reg), learn_pos ? &G_.pos : nullptr, dtokens,
                       cfg_.class_token, cfg_.reg_tokens + (cfg_.dist_token ? 1 : 0), !cfg_.no_embed_class);
  if (!cfg_.patch_norm) {
    ops::linear_backward(nullptr, &G_.patch_w, opt(G_.patch_b), A.dpe, A.cols, owner_->patch_lin_);
    return;
  }
  // dpe is the gradient of the normed projection; the patches take none, so norm_in's backward
  // accumulates its weight and bias gradients alone.
  ops::layernorm_backward(A.dpe_raw, G_.pout_w, G_.pout_b, A.dpe, A.pe, A.pe_mean, A.pe_rstd, W_.pout_w,
                          false);
  ops::linear_backward(&A.dcols_ln, &G_.patch_w, opt(G_.patch_b), A.dpe_raw, A.cols_ln, owner_->patch_lin_);
  ops::layernorm_backward(Tensor(), G_.pin_w, G_.pin_b, A.dcols_ln, A.cols, A.cols_mean, A.cols_rstd,
                          W_.pin_w, false);
}

}  // namespace vit
