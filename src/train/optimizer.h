// Optimizers over the whole parameter arena, one pass per step, following PyTorch's
// torch.optim update rules exactly (SGD with momentum/Nesterov, Adam with L2 weight decay,
// AdamW with decoupled decay), timm's Lamb (with its global gradient clip at norm 1 and
// layer-wise trust ratios on the tensors with weight decay; lambc holds the ratios to 1) and
// timm's Lion (the sign of a momentum blend, decoupled decay). Weight decay applies only to the table's decay
// group (timm: no decay on biases, norms, pos_embed, cls_token); fixed tensors are skipped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/optim_rule.h"
#include "model/params.h"

namespace vit {

struct OptimConfig {
  std::string name = "adamw";                       // sgd | adam | adamw | lamb | lambc | lion (timm's)
  float momentum = 0.9f;                            // sgd
  bool nesterov = false;                            // sgd
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw, lamb; lion's betas (no eps)
  float weight_decay = 0.f;
  // Fine-tuning: per-tensor learning-rate scales (timm's param_groups_layer_decay) and a
  // frozen backbone (only the head, is_head_param, is updated: no step, no weight decay elsewhere).
  float layer_decay = 0.f;  // 0 = off; else block i gets decay^(depth - i), see lr_scales
  bool freeze_backbone = false;
  void validate() const;
  // Whether the optimizer keeps a second moment (Adam's exp_avg_sq): not SGD's buffer or Lion's.
  bool second_moment() const { return name != "sgd" && name != "lion"; }
};

// The learning-rate scale of every tensor of the table, as timm's param_groups_layer_decay
// for its VisionTransformer: layer ids patch_embed/cls_token/dist_token/reg_token/pos_embed -> 0,
// blocks.i -> i + 1, norm and norm_pre -> depth (with the last block, timm's MATCH_PREV_GROUP),
// everything else (fc_norm, attn_pool, head) -> depth + 1, and scale = layer_decay^(depth + 1 - id). With
// freeze_backbone every tensor but the head's (is_head_param: head.*, head_dist.*) gets 0.
std::vector<float> lr_scales(const ParamTable& table, float layer_decay, bool freeze_backbone);

class Optimizer {
 public:
  Optimizer(const ParamTable& table, OptimConfig cfg);
  // One update with learning rate lr: params -= f(grads, state).
  void step(float* params, const float* grads, float lr);
  int64_t steps() const { return t_; }
  // Moments live in two arenas laid out like the parameters (for checkpoints).
  Arena& moment1() { return m_; }
  Arena& moment2() { return v_; }
  void set_steps(int64_t t) { t_ = t; }
  const OptimConfig& config() const { return cfg_; }

 private:
  const ParamTable& table_;
  OptimConfig cfg_;
  std::vector<float> scale_;          // lr_scales, one per table entry
  Arena m_, v_;                       // sgd uses m_ as the momentum buffer
  std::vector<ParamUpdate> updates_;  // the step's tensors (ops::optimizer_step)
  // lamb: the tensors in pieces, each piece's tensor, norms' sums and trust ratios.
  std::vector<ParamUpdate> pieces_;
  std::vector<size_t> owner_;
  std::vector<double> sq_;
  std::vector<float> ratio_;
  void lamb_step(UpdateRule& r, const float* grads);
  int64_t t_ = 0;
};

// Scales grads so their global L2 norm is at most max_norm (torch.nn.utils.clip_grad_norm_)
// over trainable tensors; returns the norm before clipping. Deterministic for any threads.
double clip_grad_norm(const ParamTable& table, float* grads, double max_norm);
// The global L2 norm alone.
double grad_norm(const ParamTable& table, const float* grads);
// Clamps every trainable gradient to [-limit, limit] (torch.nn.utils.clip_grad_value_).
void clip_grad_value(const ParamTable& table, float* grads, float limit);
// Adaptive gradient clipping (Brock et al. 2021, timm's adaptive_clip_grad): each unit's
// gradient norm is held to clip_factor x max(its weight's norm, eps). A unit is an output row
// of a tensor of 2 or more dimensions (weight[0], pos_embed's and cls_token's [1, ...] whole),
// or a whole vector. The table's last two tensors, the head, are left out (timm's train.py
// clips model_parameters(model, exclude_head=True) in this mode). Returns the rows clipped.
int64_t adaptive_clip_grad(const ParamTable& table, const float* params, float* grads, float clip_factor,
                           float eps = 1e-3f);

}  // namespace vit
