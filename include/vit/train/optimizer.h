// Optimizers over the whole parameter arena, one pass per step, following PyTorch's
// torch.optim update rules exactly (SGD with momentum/Nesterov, Adam with L2 weight decay,
// AdamW with decoupled decay). Weight decay applies only to the table's decay group
// (timm: no decay on biases, norms, pos_embed, cls_token); fixed tensors are skipped.
#pragma once
#include <cstdint>
#include <string>

#include "vit/core/arena.h"
#include "vit/model/params.h"

namespace vit {

struct OptimConfig {
  std::string name = "adamw";                       // sgd | adam | adamw
  float momentum = 0.9f;                            // sgd
  bool nesterov = false;                            // sgd
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
  float weight_decay = 0.f;
  void validate() const;
};

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
  Arena m_, v_;  // sgd uses m_ as the momentum buffer
  int64_t t_ = 0;
};

// Scales grads so their global L2 norm is at most max_norm (torch.nn.utils.clip_grad_norm_)
// over trainable tensors; returns the norm before clipping. Deterministic for any threads.
double clip_grad_norm(const ParamTable& table, float* grads, double max_norm);
// The global L2 norm alone.
double grad_norm(const ParamTable& table, const float* grads);

}  // namespace vit
