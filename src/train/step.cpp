#include "vit/train/step.h"

#include <cmath>
#include <vector>

#include "vit/core/error.h"
#include "vit/ops/ops.h"

namespace vit {

int64_t count_correct(const float* logits, const int64_t* labels, int64_t B, int64_t K) {
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t best = 0;
    for (int64_t k = 1; k < K; ++k)
      if (logits[b * K + k] > logits[b * K + best]) best = k;
    n += best == labels[b];
  }
  return n;
}

double LossStep::run(ViT& model, const Batch& batch, float smoothing, const ForwardMode& mode,
                     int64_t* correct) {
  const int64_t B = batch.size, K = model.config().num_classes;
  buf_.resize(2 * B * K);
  Tensor probs(buf_.data(), {B, K}), dlogits(buf_.data() + B * K, {B, K});
  Tensor targets(const_cast<float*>(batch.targets), {B, K});
  const Tensor* tp = batch.targets ? &targets : nullptr;
  Tensor logits = model.forward(batch.images, B, batch.mask, mode);
  const double loss = ops::cross_entropy_forward(probs, logits, batch.labels, tp, smoothing);
  VIT_CHECK(std::isfinite(loss), "loss is ", loss,
            " (not finite): training diverged; lower the learning rate "
            "or enable gradient clipping");
  ops::cross_entropy_backward(dlogits, probs, batch.labels, tp, smoothing);
  model.backward(dlogits);
  if (correct) {
    if (batch.labels) {
      *correct = count_correct(logits.data, batch.labels, B, K);
    } else {
      std::vector<int64_t> argmax(B);
      for (int64_t b = 0; b < B; ++b) {
        int64_t best = 0;
        for (int64_t k = 1; k < K; ++k)
          if (batch.targets[b * K + k] > batch.targets[b * K + best]) best = k;
        argmax[b] = best;
      }
      *correct = count_correct(logits.data, argmax.data(), B, K);
    }
  }
  return loss;
}

}  // namespace vit
