// Softmax cross-entropy (nn.CrossEntropyLoss with label_smoothing, or soft targets as
// timm's SoftTargetCrossEntropy), mean over the batch.
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

}  // namespace vit::cpu
