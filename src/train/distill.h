// DeiT's distillation through attention (Touvron et al. 2021, "Training data-efficient image
// transformers & distillation through attention"), as facebookresearch/deit's
// DistillationLoss computes it: a teacher's logits on the same (augmented) images, and
//   loss = (1 - alpha) * base + alpha * distillation,
// base the usual loss on the class token's head (labels, smoothing or mixup's targets), the
// distillation term on the distillation token's head (a model with head_dist), or on the
// class head itself for a model without one (plain knowledge distillation):
//   hard: cross entropy against the teacher's argmax;
//   soft: KL(softmax(teacher / tau) || softmax(student / tau)) summed, times tau^2, over B*K
//         (DeiT divides by the logits' element count, not the batch).
#pragma once
#include <string>

#include "core/tensor.h"
#include "model/config.h"

namespace vit {

struct DistillConfig {
  std::string type = "hard";  // "hard" or "soft" (DeiT's --distillation-type)
  float alpha = 0.5f;         // DeiT's --distillation-alpha
  float tau = 1.f;            // DeiT's --distillation-tau (soft only)
  void validate() const;
};

// Throws unless the teacher takes the student's images (channels and size) and classes.
void check_teacher(const ViTConfig& teacher, const ViTConfig& student);

// The distillation term of student logits [B,K] against the teacher's [B,K], and into
// dstudent (assigned) scale x its gradient. Hard takes the teacher's first largest logit.
double distillation_loss(Tensor dstudent, const Tensor& student, const Tensor& teacher,
                         const DistillConfig& c, float scale);

}  // namespace vit
