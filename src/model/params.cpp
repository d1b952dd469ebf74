#include "model/params.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace vit {

namespace {
// The Slot of a field of Weights, of block i's BlockWeights, of the pool's PoolWeights.
Slot top(Tensor Weights::*f) {
  return {.model = f};
}
Slot blk(int64_t i, Tensor BlockWeights::*f) {
  return {.in_block = f, .block = i};
}
Slot pool(Tensor PoolWeights::*f) {
  return {.pool = f};
}
}  // namespace

void ParamTable::add(std::string name, Shape shape, Init init, Slot slot) {
  const bool fixed = init == Init::SinCos || init == Init::SinCos2d;
  // timm's param_groups_weight_decay: no decay on 1-D tensors and on no_weight_decay()'s
  // {pos_embed, cls_token, dist_token, reg_token} (reg_token since timm 1.0.28, 2cff2350).
  const bool no_decay = shape.size() <= 1 || name == "pos_embed" || name == "cls_token" ||
                        name == "dist_token" || name == "reg_token";
  // 16-float alignment keeps every tensor on its own 64-byte boundary.
  specs_.push_back({std::move(name), std::move(shape), init, !no_decay && !fixed, !fixed, total_, slot});
  total_ += (specs_.back().numel() + 15) / 16 * 16;
}

ParamTable::ParamTable(const ViTConfig& c) {
  c.validate();
  const int64_t D = c.embed_dim, M = c.mlp_dim, I = c.attn_dim();
  using W = Weights;
  using BW = BlockWeights;
  using PW = PoolWeights;
  if (c.patch_norm) {  // over the patch's values in im2col's (channel, row, column) order
    add("patch_embed.norm_in.weight", {c.patch_dim()}, Init::Ones, top(&W::pin_w));
    add("patch_embed.norm_in.bias", {c.patch_dim()}, Init::Zeros, top(&W::pin_b));
  }
  add("patch_embed.proj.weight", {D, c.in_chans, c.patch_h, c.patch_w}, Init::ConvDefault, top(&W::patch_w));
  if (c.patch_bias) add("patch_embed.proj.bias", {D}, Init::ConvDefault, top(&W::patch_b));
  if (c.patch_norm) {
    add("patch_embed.norm.weight", {D}, Init::Ones, top(&W::pout_w));
    add("patch_embed.norm.bias", {D}, Init::Zeros, top(&W::pout_b));
  }
  if (c.class_token) add("cls_token", {1, 1, D}, Init::ClsToken, top(&W::cls));
  // DeiT's distillation token takes the register tokens' place (config.cpp allows one or the other).
  if (c.dist_token) add("dist_token", {1, 1, D}, Init::ClsToken, top(&W::reg));
  if (c.reg_tokens > 0) add("reg_token", {1, c.reg_tokens, D}, Init::ClsToken, top(&W::reg));
  add("pos_embed", {1, c.pos_embed_len(), D},
      c.pos_embed == "sincos"     ? Init::SinCos
      : c.pos_embed == "sincos2d" ? Init::SinCos2d
                                  : Init::TruncNormal,
      top(&W::pos));
  if (c.pre_norm) {
    add("norm_pre.weight", {D}, Init::Ones, top(&W::pre_w));
    add("norm_pre.bias", {D}, Init::Zeros, top(&W::pre_b));
  }
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    add(p + "norm1.weight", {D}, Init::Ones, blk(i, &BW::n1w));
    add(p + "norm1.bias", {D}, Init::Zeros, blk(i, &BW::n1b));
    add(p + "attn.qkv.weight", {3 * I, D}, Init::TruncNormal, blk(i, &BW::qkvw));
    if (c.qkv_bias) add(p + "attn.qkv.bias", {3 * I}, Init::Zeros, blk(i, &BW::qkvb));
    add(p + "attn.proj.weight", {D, I}, Init::TruncNormal, blk(i, &BW::projw));
    add(p + "attn.proj.bias", {D}, Init::Zeros, blk(i, &BW::projb));
    if (c.layer_scale()) add(p + "ls1.gamma", {D}, Init::LayerScale, blk(i, &BW::ls1));
    add(p + "norm2.weight", {D}, Init::Ones, blk(i, &BW::n2w));
    add(p + "norm2.bias", {D}, Init::Zeros, blk(i, &BW::n2b));
    add(p + "mlp.fc1.weight", {M, D}, Init::TruncNormal, blk(i, &BW::fc1w));
    add(p + "mlp.fc1.bias", {M}, Init::Zeros, blk(i, &BW::fc1b));
    add(p + "mlp.fc2.weight", {D, M}, Init::TruncNormal, blk(i, &BW::fc2w));
    add(p + "mlp.fc2.bias", {D}, Init::Zeros, blk(i, &BW::fc2b));
    if (c.layer_scale()) add(p + "ls2.gamma", {D}, Init::LayerScale, blk(i, &BW::ls2));
  }
  // The final norm: before pooling (`norm`) or after it (`fc_norm`); the model reads either as norm_w/b.
  const std::string norm = c.use_fc_norm() ? "fc_norm" : "norm";
  add(norm + ".weight", {D}, Init::Ones, top(&W::norm_w));
  add(norm + ".bias", {D}, Init::Zeros, top(&W::norm_b));
  if (c.map_pool()) {  // timm's AttentionPoolLatent, one latent query, the model's MLP width
    add("attn_pool.latent", {1, 1, D}, Init::Latent, pool(&PW::latent));
    add("attn_pool.q.weight", {D, D}, Init::TruncNormal, pool(&PW::qw));
    add("attn_pool.q.bias", {D}, Init::Zeros, pool(&PW::qb));
    add("attn_pool.kv.weight", {2 * D, D}, Init::TruncNormal, pool(&PW::kvw));
    add("attn_pool.kv.bias", {2 * D}, Init::Zeros, pool(&PW::kvb));
    add("attn_pool.proj.weight", {D, D}, Init::TruncNormal, pool(&PW::projw));
    add("attn_pool.proj.bias", {D}, Init::Zeros, pool(&PW::projb));
    add("attn_pool.norm.weight", {D}, Init::Ones, pool(&PW::nw));
    add("attn_pool.norm.bias", {D}, Init::Zeros, pool(&PW::nb));
    add("attn_pool.mlp.fc1.weight", {M, D}, Init::TruncNormal, pool(&PW::fc1w));
    add("attn_pool.mlp.fc1.bias", {M}, Init::Zeros, pool(&PW::fc1b));
    add("attn_pool.mlp.fc2.weight", {D, M}, Init::TruncNormal, pool(&PW::fc2w));
    add("attn_pool.mlp.fc2.bias", {D}, Init::Zeros, pool(&PW::fc2b));
  }
  if (c.num_classes == 0) return;  // headless: features only (timm's num_classes=0)
  add("head.weight", {c.num_classes, D}, Init::TruncNormal, top(&W::head_w));
  add("head.bias", {c.num_classes}, Init::Zeros, top(&W::head_b));
  if (c.head_dist) {
    add("head_dist.weight", {c.num_classes, D}, Init::TruncNormal, top(&W::head_dist_w));
    add("head_dist.bias", {c.num_classes}, Init::Zeros, top(&W::head_dist_b));
  }
}

Weights bind_weights(const ParamTable& table, const ViTConfig& cfg, float* base) {
  Weights w;
  w.blocks.resize(size_t(cfg.depth));
  for (const ParamSpec& s : table.specs()) s.slot.in(w) = Tensor(base + s.offset, s.shape);
  // The patch embedding runs as a product: its conv weight [D, C, Ph, Pw] seen as [D, C*Ph*Pw].
  w.patch_w = reshape(w.patch_w, {cfg.embed_dim, cfg.patch_dim()});
  return w;
}

bool is_head_param(const std::string& name) {
  return name.rfind("head.", 0) == 0 || name.rfind("head_dist.", 0) == 0;
}

const ParamSpec* ParamTable::find(const std::string& name) const {
  for (auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

const ParamSpec& ParamTable::at(const std::string& name) const {
  const ParamSpec* s = find(name);
  VIT_CHECK(s, "no parameter named '", name, "' in this model");
  return *s;
}

void sincos_pos_embed(float* out, int64_t T, int64_t C) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < C; ++j) {
      const double freq = std::pow(10000.0, double(j - j % 2) / double(C));
      out[t * C + j] = float(j % 2 == 0 ? std::sin(t / freq) : std::cos(t / freq));
    }
}

void sincos2d_pos_embed(float* out, int64_t prefix, int64_t gh, int64_t gw, int64_t C) {
  std::fill(out, out + prefix * C, 0.f);
  const int64_t Q = C / 4;
  for (int64_t y = 0; y < gh; ++y)
    for (int64_t x = 0; x < gw; ++x) {
      float* row = out + (prefix + y * gw + x) * C;
      for (int64_t k = 0; k < Q; ++k) {
        // As PyTorch computes it in float32: omega = 1 / 10000^(k / (Q - 1)), then x * omega.
        const float omega = 1.f / std::pow(10000.f, float(k) / float(Q - 1));
        const float ax = float(x) * omega, ay = float(y) * omega;
        row[k] = std::sin(ax);
        row[Q + k] = std::cos(ax);
        row[2 * Q + k] = std::sin(ay);
        row[3 * Q + k] = std::cos(ay);
      }
    }
}

void init_params(const ParamTable& table, const ViTConfig& cfg, float* params, uint64_t seed) {
  Rng rng(seed);
  const double conv_bound = 1.0 / std::sqrt(double(cfg.patch_dim()));  // 1/sqrt(fan_in)
  for (const auto& s : table.specs()) {
    float* p = params + s.offset;
    const int64_t n = s.numel();
    switch (s.init) {
      case Init::TruncNormal: rng.fill_trunc_normal(p, n, 0.02, -2.0, 2.0); break;
      case Init::Zeros:
        for (int64_t i = 0; i < n; ++i) p[i] = 0.f;
        break;
      case Init::Ones:
        for (int64_t i = 0; i < n; ++i) p[i] = 1.f;
        break;
      case Init::ClsToken:
        for (int64_t i = 0; i < n; ++i) p[i] = float(rng.normal() * 1e-6);
        break;
      case Init::ConvDefault:
        for (int64_t i = 0; i < n; ++i) p[i] = float((2.0 * rng.uniform() - 1.0) * conv_bound);
        break;
      case Init::Latent: {
        const double std = 1.0 / std::sqrt(double(cfg.embed_dim));
        rng.fill_trunc_normal(p, n, std, -2.0 * std, 2.0 * std);
        break;
      }
      case Init::LayerScale:
        for (int64_t i = 0; i < n; ++i) p[i] = cfg.init_values;
        break;
      case Init::SinCos: sincos_pos_embed(p, s.shape[1], s.shape[2]); break;
      case Init::SinCos2d:
        sincos2d_pos_embed(p, s.shape[1] - cfg.num_patches(), cfg.grid_h(), cfg.grid_w(), s.shape[2]);
        break;
    }
  }
}

}  // namespace vit
