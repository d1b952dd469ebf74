// One optimizer update, as the ops and every backend see it: the rule (sgd with momentum,
// Adam, AdamW, written as torch.optim computes them; timm's Lion) and the tensors it updates.
#pragma once
#include <cstdint>

namespace vit {

enum class OptimKind { sgd, adam, adamw, lamb, lion };

struct UpdateRule {
  OptimKind kind = OptimKind::adamw;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw, lamb; lion's betas
  float momentum = 0.f;                             // sgd
  bool nesterov = false;                            // sgd
  bool first = false;                               // the first step (sgd's buffer starts as the gradient)
  double bias1 = 1.0;                               // Adam's 1 - beta1^t
  float bias2_sqrt = 1.f;                           // sqrt(1 - beta2^t)
  float grad_div = 1.f;                             // lamb: gradients divided by this (its global clip)
};

// One parameter tensor's update: p -= f(g, m, v), n floats each (v null for sgd), with its
// own learning rate and weight decay.
struct ParamUpdate {
  float* p;
  const float* g;
  float *m, *v;
  int64_t n;
  float lr, wd;
};

// n floats from data: a stretch of a tensor.
struct Span {
  float* data;
  int64_t n;
};

}  // namespace vit
