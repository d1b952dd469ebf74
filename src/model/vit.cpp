// The model as the paper's sequence of ops: ViT::run_forward (patch embedding, tokens, the
// encoder blocks, the final norm and pooling, the head) and ViT::backward_local, its mirror.
// How each op runs (the weights' form, the class-token tail, the masks, the parts of a
// batch) is decided elsewhere: docs/design.md, "Layers" (who decides what in model/).
#include "model/vit.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"
#include "core/threads.h"
#include "ops/ops.h"

namespace vit {

namespace {

// Dropout sites: each gets its own key per step, so masks never repeat across sites.
enum : uint64_t { kSitePos = 1, kSiteHead = 2 };
enum BlockSite : uint64_t { kAttnDrop, kProjDrop, kPath1, kMlpDrop1, kMlpDrop2, kPath2 };
uint64_t block_site(int64_t layer, BlockSite s) {
  return 16 + uint64_t(layer) * 8 + s;
}

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

void ViT::run_forward(Acts& A, const float* images, const uint8_t* mask, const ForwardMode& mode, float* attn,
                      bool every_row, float* pool_attn, const std::vector<float*>* blocks) {
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim, I = cfg_.attn_dim();
  const Draws d{mode, B};
  set_masks(A, mask);
  const uint8_t* keys_mask = A.have_mask ? A.key_mask.data() : nullptr;

  Tensor img(const_cast<float*>(images), {B, cfg_.in_chans, cfg_.img_h, cfg_.img_w});
  ops::im2col_patches(A.cols, img, cfg_.patch_h, cfg_.patch_w);
  if (cfg_.patch_norm) {  // vit-pytorch: LayerNorm, projection, LayerNorm
    ops::layernorm_forward(A.cols_ln, A.cols_mean, A.cols_rstd, A.cols, W_.pin_w, W_.pin_b, cfg_.norm_eps);
    ops::linear_forward(A.pe, A.cols_ln, lin().patch);
    ops::layernorm_forward(A.pe_ln, A.pe_mean, A.pe_rstd, A.pe, W_.pout_w, W_.pout_b, cfg_.norm_eps);
  } else {
    ops::linear_forward(A.pe, A.cols, lin().patch);
  }
  const Tensor tokens = cfg_.pre_norm ? A.x_pre : A.x0;
  ops::tokens_forward(tokens, cfg_.patch_norm ? A.pe_ln : A.pe, opt(W_.cls), opt(W_.reg), W_.pos);
  ops::dropout_forward(tokens, d.rate(cfg_.pos_drop_rate), d.key(kSitePos), d.first(tokens));
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
    const float proj_p = d.rate(cfg_.proj_drop_rate), path_p = d.rate(cfg_.drop_path_at(l));
    const float attn_p = d.rate(cfg_.attn_drop_rate);
    // With LayerScale, training keeps each branch for the gammas' gradients.
    const Tensor br1 = t.br1.data ? t.br1 : Tensor(A.branch.data, {B * Tq, C});
    const Tensor br2 = t.br2.data ? t.br2 : Tensor(A.branch.data, {B * Tq, C});
    if (l == 0)  // later blocks' ln1 comes with the residual sum that ends the block before
      ops::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, reshape(x, {B * T, C}), w.n1w, w.n1b,
                             cfg_.norm_eps);
    // The block's products on its weights as prepared (block_lin); a.ln1_b and t.ao_b are the
    // inputs in the form those products keep for the backward, where they keep one.
    const BlockLinears& lw = block_lin(A, l);
    ops::linear_forward(reshape(a.qkv, {B * T, 3 * I}), a.ln1, lw.qkv, ops::Epilogue::none, a.ln1_b);
    if (p.cls_only) {
      ops::attention_cls_forward(t.ao, t.probs, attn_p > 0.f ? &t.probs_drop : nullptr, a.qkv, keys_mask,
                                 attn_p, d.key(block_site(l, kAttnDrop)), d.s0);
      ops::first_tokens(A.xcls, x);  // the rows of x the head reads (class, distillation token)
      x = A.xcls;
    } else {
      float* maps = attn ? attn + l * a.probs.numel() : nullptr;  // this layer's attention maps
      const Tensor probs = maps && !a.probs.data ? Tensor(maps, a.probs.shape) : a.probs;
      ops::attention_forward(a.ao, probs, attn_p > 0.f ? &a.probs_drop : nullptr, a.qkv, keys_mask, attn_p,
                             d.key(block_site(l, kAttnDrop)), d.s0);
      if (maps && probs.data != maps) ops::copy(Tensor(maps, probs.shape), probs);
    }
    ops::linear_forward(br1, reshape(t.ao, {B * Tq, I}), lw.proj, ops::Epilogue::none, t.ao_b);
    // r1 = x + branch and its LayerNorm in one walk over the samples.
    ops::residual_layernorm_forward(t.r1, x, reshape(br1, {B, Tq, C}), opt(w.ls1), proj_p,
                                    d.key(block_site(l, kProjDrop)), path_p, d.key(block_site(l, kPath1)),
                                    d.s0, {t.ln2, t.ln2_mean, t.ln2_rstd, w.n2w, w.n2b, cfg_.norm_eps});
    // forward() (whose activations backward() reads, whatever the mode) keeps the
    // activation's derivative, infer() nothing.
    ops::mlp_forward(br2, t.ln2, lw.fc1, lw.fc2, t.mlp, &A == &train_,
                     {proj_p, d.key(block_site(l, kMlpDrop1)), d.first(t.mlp.act)}, cfg_.activation());
    if (l + 1 < cfg_.depth) {  // out = r1 + branch, and the next block's ln1 with it
      BlockActs& n = plan(A, l + 1, true).a;
      const BlockWeights& wn = W_.blocks[l + 1];
      ops::residual_layernorm_forward(t.out, t.r1, reshape(br2, {B, Tq, C}), opt(w.ls2), proj_p,
                                      d.key(block_site(l, kMlpDrop2)), path_p, d.key(block_site(l, kPath2)),
                                      d.s0, {n.ln1, n.ln1_mean, n.ln1_rstd, wn.n1w, wn.n1b, cfg_.norm_eps});
    } else {
      ops::residual_forward(t.out, t.r1, reshape(br2, {B, Tq, C}), opt(w.ls2), proj_p,
                            d.key(block_site(l, kMlpDrop2)), path_p, d.key(block_site(l, kPath2)), d.s0);
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
      ops::pool_forward(A.pooled_ln, reshape(A.lnf, {B, T, C}), pool_mask(A), true, cfg_.first_pooled());
  } else {
    // timm norms every token before token pooling; LayerNorm is per row, so norming the
    // pooled row alone gives the same numbers for a fraction of the work. With fc_norm
    // the norm comes after pooling anyway.
    // Token pooling takes row 0 (x is the class-token tail's [B,1,C] when that ran), and
    // with head_dist row 1 as well, into A.pooled's second half.
    ops::pool_forward(A.pooled, x, pool_mask(A), cfg_.avg_pool(), cfg_.avg_pool() ? cfg_.first_pooled() : 0);
    ops::layernorm_forward(A.pooled_ln, A.pooled_mean, A.pooled_rstd, A.pooled, W_.norm_w, W_.norm_b,
                           cfg_.norm_eps);
  }
  ops::dropout_forward(A.pooled_ln, d.rate(cfg_.drop_rate), d.key(kSiteHead), d.first(A.pooled_ln));
  head_forward(A, mode);
}

void ViT::attn_pool_forward(Acts& A, bool training, float* pool_attn) {
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim, first = cfg_.first_pooled();
  PoolActs& p = A.pool;
  const PoolLinears& lw = lin().pool;
  // timm's AttentionPoolLatent: q = q(latent); k, v = kv(x); attention; proj; x + mlp(norm(x)).
  // timm 1.0 pools the patch tokens (the prefix tokens too with pool_include_prefix): kv runs
  // on every row, the attention reads rows first..T-1.
  ops::linear_forward(p.q, reshape(W_.pool.latent, {1, C}), lw.q);
  ops::linear_forward(p.kv, A.lnf, lw.kv);
  // Inference keeps no probabilities unless they are asked for (vit attention --method pool).
  const Tensor probs = pool_attn && !p.probs.data ? Tensor(pool_attn, p.probs.shape) : p.probs;
  ops::attention_pool_forward(p.ao, probs, p.q, reshape(p.kv, {B, T, 2 * C}), pool_mask(A), first);
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
  const PoolLinears& lw = lin().pool;
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

void ViT::backward_local(const Tensor& dlogits, const Tensor* ddist) {
  Acts& A = train_;
  const int64_t B = A.B, T = cfg_.num_tokens(), C = cfg_.embed_dim, I = cfg_.attn_dim();
  check_shape(dlogits, {B, cfg_.num_classes}, "backward: grad logits");
  const ForwardMode& mode = last_mode_;
  const Draws d{mode, B};

  head_backward(A, dlogits, ddist);
  if (backbone_frozen_) return;  // only the head trains: nothing below needs gradients
  ops::dropout_backward(A.dpooled_ln, d.rate(cfg_.drop_rate), d.key(kSiteHead), d.first(A.dpooled_ln));
  if (norm_all_tokens()) {
    if (cfg_.map_pool())
      attn_pool_backward(A);
    else
      ops::pool_backward(reshape(A.dln, {B, T, C}), A.dpooled_ln, pool_mask(A), true, cfg_.first_pooled());
    ops::layernorm_backward(reshape(A.dx, {B * T, C}), G_.norm_w, G_.norm_b, A.dln,
                            reshape(A.blocks.back().out, {B * T, C}), A.lnf_mean, A.lnf_rstd, W_.norm_w,
                            false);
  } else {
    ops::layernorm_backward(A.dpooled, G_.norm_w, G_.norm_b, A.dpooled_ln, A.pooled, A.pooled_mean,
                            A.pooled_rstd, W_.norm_w, false);
    // The class-token tail (A.tail) holds the last block's class-token rows alone: A.dxcls.
    ops::pool_backward(A.tail ? A.dxcls : A.dx, A.dpooled, pool_mask(A), cfg_.avg_pool(),
                       cfg_.avg_pool() ? cfg_.first_pooled() : 0);
  }

  // A.dx carries the gradient of the residual stream down through the blocks (A.dxcls
  // through the tail's rows).
  const int64_t M = cfg_.mlp_dim;
  // A branch that nothing scales (no dropout, drop path or LayerScale) has the residual
  // stream's gradient: the products read A.dx itself, which changes only after them.
  // ls: the branch's LayerScale gamma in block l.
  auto unscaled = [&](int64_t l, const Tensor& ls) {
    return d.rate(cfg_.proj_drop_rate) == 0.f && d.rate(cfg_.drop_path_at(l)) == 0.f && !ls.data;
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
    const float proj_p = d.rate(cfg_.proj_drop_rate), path_p = d.rate(cfg_.drop_path_at(l));
    const float attn_p = d.rate(cfg_.attn_drop_rate);
    // MLP branch: out = r1 + branch. Drop path is per sample: the residual ops need the
    // [B,Tq,C] views.
    const Tensor br1 = t.br1.data ? reshape(t.br1, {B, Tq, C}) : Tensor{};
    const Tensor br2 = t.br2.data ? reshape(t.br2, {B, Tq, C}) : Tensor{};
    const bool plain2 = unscaled(l, w.ls2), plain1 = unscaled(l, w.ls1);
    if (!plain2)
      ops::residual_backward(dbranch3d, opt(g.ls2), dxq, opt(br2), opt(w.ls2), proj_p,
                             d.key(block_site(l, kMlpDrop2)), path_p, d.key(block_site(l, kPath2)), d.s0);
    // The products on the weights the forward used, and the inputs it kept.
    const BlockLinears& lw = block_lin(A, l);
    ops::mlp_backward(dlnq, dact, g.fc1w, g.fc1b, g.fc2w, fc2b_by_norm1[size_t(l) + 1] ? nullptr : &g.fc2b,
                      plain2 ? dx2d : dbranch, t.ln2, lw.fc1, lw.fc2, t.mlp,
                      {proj_p, d.key(block_site(l, kMlpDrop1)), d.first(dact)});
    ops::layernorm_backward(dx2d, g.n2w, g.n2b, dlnq, reshape(t.r1, {B * Tq, C}), t.ln2_mean, t.ln2_rstd,
                            w.n2w, true, plain1 ? &g.projb : nullptr);
    // Attention branch: r1 = x + branch.
    if (!plain1)
      ops::residual_backward(dbranch3d, opt(g.ls1), dxq, opt(br1), opt(w.ls1), proj_p,
                             d.key(block_site(l, kProjDrop)), path_p, d.key(block_site(l, kPath1)), d.s0);
    Tensor dao2d = reshape(dao, {B * Tq, I});
    ops::linear_backward(&dao2d, &g.projw, plain1 ? nullptr : &g.projb, plain1 ? dx2d : dbranch,
                         reshape(t.ao, {B * Tq, I}), lw.proj, t.ao_b);
    if (p.cls_only) {
      ops::attention_cls_backward(A.dqkv, dao, a.qkv, t.probs, attn_p > 0.f ? &t.probs_drop : nullptr, attn_p,
                                  d.key(block_site(l, kAttnDrop)), d.s0);
      // The residual stream's gradient below the tail: the tail's rows, zeros elsewhere.
      ops::first_tokens_backward(A.dx, A.dxcls);
    } else {
      ops::attention_backward(A.dqkv, A.dao, a.qkv, a.probs, attn_p > 0.f ? &a.probs_drop : nullptr, attn_p,
                              d.key(block_site(l, kAttnDrop)), d.s0);
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
  ops::dropout_backward(dtokens, d.rate(cfg_.pos_drop_rate), d.key(kSitePos), d.first(dtokens));
  const bool learn_pos = cfg_.pos_embed == "learn";
  ops::tokens_backward(A.dpe, opt(G_.cls), opt(G_.reg), learn_pos ? &G_.pos : nullptr, dtokens,
                       cfg_.class_token, cfg_.reg_tokens + (cfg_.dist_token ? 1 : 0), !cfg_.no_embed_class);
  if (!cfg_.patch_norm) {
    ops::linear_backward(nullptr, &G_.patch_w, opt(G_.patch_b), A.dpe, A.cols, lin().patch);
    return;
  }
  // dpe is the gradient of the normed projection; the patches take none, so norm_in's backward
  // accumulates its weight and bias gradients alone.
  ops::layernorm_backward(A.dpe_raw, G_.pout_w, G_.pout_b, A.dpe, A.pe, A.pe_mean, A.pe_rstd, W_.pout_w,
                          false);
  ops::linear_backward(&A.dcols_ln, &G_.patch_w, opt(G_.patch_b), A.dpe_raw, A.cols_ln, lin().patch);
  ops::layernorm_backward(Tensor(), G_.pin_w, G_.pin_b, A.dcols_ln, A.cols, A.cols_mean, A.cols_rstd,
                          W_.pin_w, false);
}

}  // namespace vit
