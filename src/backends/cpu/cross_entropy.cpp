// Softmax cross-entropy (nn.CrossEntropyLoss with label_smoothing, or soft targets as
// timm's SoftTargetCrossEntropy), mean over the batch; binary cross-entropy (timm's
// BinaryCrossEntropy).
#include <cmath>

#include "backends/cpu/cpu.h"

namespace vit::cpu {

namespace {
inline float target_at(const int64_t* labels, const float* targets, int64_t b, int64_t k, int64_t K,
                       float eps) {
  if (!labels) return targets[b * K + k];
  return (k == labels[b] ? 1.f - eps : 0.f) + eps / float(K);
}
}  // namespace

double cross_entropy_forward(float* probs, const float* logits, const int64_t* labels, const float* targets,
                             int64_t B, int64_t K, float smoothing) {
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    const float* z = logits + b * K;
    float mx = z[0];
    for (int64_t k = 1; k < K; ++k) mx = z[k] > mx ? z[k] : mx;
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(double(z[k] - mx));
    const double lse = mx + std::log(sum);
    double row = 0;
    for (int64_t k = 0; k < K; ++k) {
      probs[b * K + k] = float(std::exp(double(z[k]) - lse));
      row -= target_at(labels, targets, b, k, K, smoothing) * (double(z[k]) - lse);
    }
    total += row;
  }
  return total / double(B);
}

void cross_entropy_backward(float* dlogits, const float* probs, const int64_t* labels, const float* targets,
                            int64_t B, int64_t K, float smoothing, float scale) {
  // d/dz of -sum_k t_k log p_k is p * sum(t) - t; sum(t) is 1 unless soft targets are not
  // normalized, which this keeps exact anyway.
  const float s = scale / float(B);
  for (int64_t b = 0; b < B; ++b) {
    float tsum = 0.f;
    for (int64_t k = 0; k < K; ++k) tsum += target_at(labels, targets, b, k, K, smoothing);
    for (int64_t k = 0; k < K; ++k)
      dlogits[b * K + k] = s * (probs[b * K + k] * tsum - target_at(labels, targets, b, k, K, smoothing));
  }
}

// Binary cross-entropy on logits, as torch's binary_cross_entropy_with_logits with timm's
// BinaryCrossEntropy in front (one-hot smoothing, thresholding, sum over classes).
namespace {
// Row b's target for class k.
inline double bce_target_at(const int64_t* labels, const float* targets, int64_t b, int64_t k, int64_t K,
                            float smoothing, const BceOptions& o) {
  // In float, as timm builds the one-hot targets in the logits' float32 (a threshold at a
  // smoothed target's value then decides as there).
  float t;
  if (labels) {
    const float off = float(double(smoothing) / double(K)), on = float(1.0 - double(smoothing) + off);
    t = k == labels[b] ? on : off;
  } else {
    t = targets[b * K + k];
  }
  return o.threshold ? (t > o.target_threshold ? 1.0 : 0.0) : double(t);
}

// The mean's divisor: every element, or the rows alone when the classes are summed.
inline double divisor(int64_t B, int64_t K, const BceOptions& o) {
  return double(o.sum_classes ? B : B * K);
}
}  // namespace

double bce_forward(float* probs, const float* logits, const int64_t* labels, const float* targets, int64_t B,
                   int64_t K, float smoothing, const BceOptions& o) {
  // -[w t log s(x) + (1 - t) log(1 - s(x))] with w = pos_weight, written without overflow:
  // (1 - t) x + (1 + (w - 1) t) (log(1 + e^-|x|) + max(-x, 0)).
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t k = 0; k < K; ++k) {
      const double x = logits[b * K + k], t = bce_target_at(labels, targets, b, k, K, smoothing, o);
      const double softplus_neg = std::log1p(std::exp(-std::fabs(x))) + std::fmax(-x, 0.0);  // -log s(x)
      total += (1.0 - t) * x + (1.0 + (double(o.pos_weight) - 1.0) * t) * softplus_neg;
      probs[b * K + k] = float(1.0 / (1.0 + std::exp(-x)));
    }
  }
  return total / divisor(B, K, o);
}

void bce_backward(float* dlogits, const float* probs, const int64_t* labels, const float* targets, int64_t B,
                  int64_t K, float smoothing, const BceOptions& o, float scale) {
  // d/dx = s(x) (w t + 1 - t) - w t.
  const double s = double(scale) / divisor(B, K, o), w = o.pos_weight;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k) {
      const double t = bce_target_at(labels, targets, b, k, K, smoothing, o), p = probs[b * K + k];
      dlogits[b * K + k] = float(s * (p * (w * t + 1.0 - t) - w * t));
    }
}

}  // namespace vit::cpu
