#include "vit/train/step.h"

#include <algorithm>
#include <cmath>

#include "vit/ops/ops.h"

namespace vit {

double LossStep::run(ViT& model, const Batch& batch, float smoothing, const ForwardMode& mode,
                     int64_t* correct, float grad_scale) {
  const int64_t B = batch.size, K = model.config().num_classes;
  buf_.resize(2 * B * K);
  Tensor probs(buf_.data(), {B, K}), dlogits(buf_.data() + B * K, {B, K});
  Tensor targets(const_cast<float*>(batch.targets), {B, K});
  const Tensor* tp = batch.targets ? &targets : nullptr;
  Tensor logits = model.forward(batch.images, B, batch.mask, mode);
  const double loss = ops::cross_entropy_forward(probs, logits, batch.labels, tp, smoothing);
  if (!std::isfinite(loss)) {  // no backward: the caller stops (and says what it kept)
    if (correct) *correct = 0;
    return loss;
  }
  ops::cross_entropy_backward(dlogits, probs, batch.labels, tp, smoothing, grad_scale);
  model.backward(dlogits);
  if (correct) {
    // Against the labels, or with soft targets against each row's largest target.
    argmax_.resize(size_t(2 * B));
    int64_t *got = argmax_.data(), *want = got + B;
    ops::argmax_rows(got, logits);
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
