// One training step's loss and gradients: forward, softmax cross-entropy (label smoothing
// or soft targets) or binary cross-entropy, backward. Buffers for probabilities and dlogits
// are allocated once.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/arena.h"
#include "core/bce_options.h"
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

// The loss: softmax cross-entropy with label smoothing (a float converts to this), or with bce
// binary cross-entropy (timm's --bce-loss: BinaryCrossEntropy with the same smoothing).
struct LossConfig {
  LossConfig(float smoothing_ = 0.f) : smoothing(smoothing_) {}  // NOLINT(google-explicit-constructor)
  float smoothing = 0.f;
  std::optional<BceOptions> bce;
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
  // The loss's smoothing applies to labels; soft targets come smoothed (mixup's).
  double run(ViT& model, const Batch& batch, const LossConfig& loss, const ForwardMode& mode,
             int64_t* correct = nullptr, float grad_scale = 1.f, const Distillation* kd = nullptr);

 private:
  Arena buf_;
  std::vector<int64_t> argmax_;  // [2B]: each row's predicted and wanted class
};

}  // namespace vit
