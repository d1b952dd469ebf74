// How the binary cross-entropy loss reads its targets and sums (timm's BinaryCrossEntropy
// arguments; ops::bce_forward and the CPU backend take it).
#pragma once

namespace vit {

struct BceOptions {
  bool threshold = false;  // binarize the targets: 1 where above target_threshold, else 0
  float target_threshold = 0.f;
  float pos_weight = 1.f;    // the positive term's weight, every class alike
  bool sum_classes = false;  // sum over the classes, mean over the batch (else mean of all)
};

}  // namespace vit
