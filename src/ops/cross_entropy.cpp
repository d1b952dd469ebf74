#include <cmath>

#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

namespace {
void check_targets(const Tensor& logits, const int64_t* labels, const Tensor* targets) {
  VIT_CHECK(logits.ndim() == 2, "cross entropy: logits must be [B,K], got ", shape_str(logits.shape));
  const int64_t B = logits.dim(0), K = logits.dim(1);
  VIT_CHECK((labels != nullptr) != (targets != nullptr), "cross entropy: give labels or soft targets");
  if (targets) check_shape(*targets, logits.shape, "soft targets");
  if (labels)
    for (int64_t b = 0; b < B; ++b)
      VIT_CHECK(labels[b] >= 0 && labels[b] < K, "label ", labels[b], " of sample ", b,
                " is out of range for ", K, " classes");
}
}  // namespace

double cross_entropy_forward(Tensor probs, const Tensor& logits, const int64_t* labels, const Tensor* targets,
                             float smoothing) {
  check_targets(logits, labels, targets);
  check_shape(probs, logits.shape, "probs");
  switch (common_device({&probs, &logits}, "cross_entropy")) {
    case Device::CPU:
      return cpu::cross_entropy_forward(probs.data, logits.data, labels, targets ? targets->data : nullptr,
                                        logits.dim(0), logits.dim(1), smoothing);
    default: unsupported("cross_entropy", logits.device);
  }
}

void cross_entropy_backward(Tensor dlogits, const Tensor& probs, const int64_t* labels, const Tensor* targets,
                            float smoothing, float scale) {
  check_targets(probs, labels, targets);
  check_shape(dlogits, probs.shape, "grad logits");
  switch (common_device({&dlogits, &probs}, "cross_entropy_backward")) {
    case Device::CPU:
      return cpu::cross_entropy_backward(dlogits.data, probs.data, labels, targets ? targets->data : nullptr,
                                         probs.dim(0), probs.dim(1), smoothing, scale);
    default: unsupported("cross_entropy_backward", dlogits.device);
  }
}

namespace {
void check_bce(const Tensor& logits, const int64_t* labels, const Tensor* targets, float smoothing,
               const BceOptions& o) {
  check_targets(logits, labels, targets);
  VIT_CHECK(smoothing >= 0.f && smoothing < 1.f, "binary cross entropy: smoothing must be in [0, 1), got ",
            smoothing);
  VIT_CHECK(std::isfinite(o.pos_weight) && o.pos_weight >= 0.f,
            "binary cross entropy: the positive weight must be a finite number >= 0, got ", o.pos_weight);
}
}  // namespace

double bce_forward(Tensor probs, const Tensor& logits, const int64_t* labels, const Tensor* targets,
                   float smoothing, const BceOptions& o) {
  check_bce(logits, labels, targets, smoothing, o);
  check_shape(probs, logits.shape, "probs");
  switch (common_device({&probs, &logits}, "bce")) {
    case Device::CPU:
      return cpu::bce_forward(probs.data, logits.data, labels, targets ? targets->data : nullptr,
                              logits.dim(0), logits.dim(1), smoothing, o);
    default: unsupported("bce", logits.device);
  }
}

void bce_backward(Tensor dlogits, const Tensor& probs, const int64_t* labels, const Tensor* targets,
                  float smoothing, const BceOptions& o, float scale) {
  check_bce(probs, labels, targets, smoothing, o);
  check_shape(dlogits, probs.shape, "grad logits");
  switch (common_device({&dlogits, &probs}, "bce_backward")) {
    case Device::CPU:
      return cpu::bce_backward(dlogits.data, probs.data, labels, targets ? targets->data : nullptr,
                               probs.dim(0), probs.dim(1), smoothing, o, scale);
    default: unsupported("bce_backward", dlogits.device);
  }
}

}  // namespace vit::ops
