#include "train/step.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace vit {

double LossStep::run(ViT& model, const Batch& batch, const LossConfig& lc, const ForwardMode& mode,
                     int64_t* correct, float grad_scale, const Distillation* kd) {
  const int64_t B = batch.size, K = model.config().num_classes;
  const bool two_heads = kd && model.config().head_dist;
  buf_.resize((kd ? 4 : 2) * B * K);  // probs, dlogits; distilling, ddist and the heads' mean
  Tensor probs(buf_.data(), {B, K}), dlogits(buf_.data() + B * K, {B, K});
  Tensor targets(const_cast<float*>(batch.targets), {B, K});
  const Tensor* tp = batch.targets ? &targets : nullptr;
  ForwardMode m = mode;
  m.distill = two_heads;
  Tensor logits = model.forward(batch.images, B, batch.mask, m);
  double loss = lc.bce ? ops::bce_forward(probs, logits, batch.labels, tp, lc.smoothing, *lc.bce)
                       : ops::cross_entropy_forward(probs, logits, batch.labels, tp, lc.smoothing);
  if (!std::isfinite(loss)) {  // no backward: the caller stops (and says what it kept)
    if (correct) *correct = 0;
    return loss;
  }
  const float base_scale = kd ? grad_scale * (1.f - kd->cfg.alpha) : grad_scale;
  if (lc.bce)
    ops::bce_backward(dlogits, probs, batch.labels, tp, lc.smoothing, *lc.bce, base_scale);
  else
    ops::cross_entropy_backward(dlogits, probs, batch.labels, tp, lc.smoothing, base_scale);
  Tensor scored = logits;  // what the top-1 counts: the logits as evaluation gives them
  if (!kd) {
    model.backward(dlogits);
  } else {
    // DeiT: (1 - alpha) base on the class head + alpha distillation on the distillation
    // head (or, without one, on the class head too).
    const Tensor teacher(const_cast<float*>(kd->teacher_logits), {B, K});
    const Tensor student = two_heads ? model.dist_logits() : logits;
    Tensor ddist(buf_.data() + 2 * B * K, {B, K});
    const double kd_loss = distillation_loss(ddist, student, teacher, kd->cfg, grad_scale * kd->cfg.alpha);
    loss = (1.0 - kd->cfg.alpha) * loss + kd->cfg.alpha * kd_loss;
    if (!std::isfinite(loss)) {
      if (correct) *correct = 0;
      return loss;
    }
    if (two_heads) {
      model.backward(dlogits, ddist);
      scored = Tensor(buf_.data() + 3 * B * K, {B, K});  // (cls + dist) / 2
      ops::mean_of_two(scored, logits, student);
    } else {
      ops::add_into(dlogits, ddist);
      model.backward(dlogits);
    }
  }
  if (correct) {
    // Against the labels, or with soft targets against each row's largest target.
    argmax_.resize(size_t(2 * B));
    int64_t *got = argmax_.data(), *want = got + B;
    ops::argmax_rows(got, scored);
    if (batch.labels)
      std::copy(batch.labels, batch.labels + B, want);
    else
      ops::argmax_rows(want, targets);
    int64_t n = 0;
    for (int64_t b = 0; b < B; ++b) n += got[b] == want[b];
    *correct = n;
  }
  return loss;
}

}  // namespace vit
