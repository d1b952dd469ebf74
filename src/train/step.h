// One training step's loss and gradients: forward, softmax cross-entropy (label smoothing
// or soft targets), backward. Buffers for probabilities and dlogits are allocated once.
#pragma once
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "model/vit.h"
#include "train/distill.h"

namespace vit {

struct Batch {
  const float* images = nullptr;    // [B,C,H,W], normalized
  int64_t size = 0;                 // B
  const int64_t* labels = nullptr;  // [B], or
  const float* targets = nullptr;   // [B,K] soft targets (mixup, cutmix)
  const uint8_t* mask = nullptr;    // [B,N] visible patches, optional
};

// A teacher's logits [B,K] on the batch's images, and how to distill them (distill.h).
struct Distillation {
  const float* teacher_logits = nullptr;
  DistillConfig cfg;
};

class LossStep {
 public:
  // Runs forward and backward, accumulating into model.grads(); returns the mean loss. A
  // loss that is not finite (NaN or Inf) is returned without a backward (and 0 correct
  // predictions): the caller stops the run (train() says which checkpoint it kept).
  // Counts correct top-1 predictions (against labels, or the targets' argmax) in *correct.
  // The gradients are of grad_scale x the mean loss: a shard of b rows of a global batch
  // of B passes b / B, so that the shards' gradients sum to the global batch's.
  // With kd, the loss is DeiT's (distill.h): a model with head_dist runs a distilling forward
  // (ForwardMode::distill), and correct counts the two heads' mean, as it is evaluated.
  double run(ViT& model, const Batch& batch, float smoothing, const ForwardMode& mode,
             int64_t* correct = nullptr, float grad_scale = 1.f, const Distillation* kd = nullptr);

 private:
  Arena buf_;
  std::vector<int64_t> argmax_;  // [2B]: each row's predicted and wanted class
};

}  // namespace vit
