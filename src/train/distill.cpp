#include "train/distill.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace vit {

void DistillConfig::validate() const {
  VIT_VALUE_CHECK(type == "hard" || type == "soft", "distillation type must be 'hard' or 'soft', got '", type,
                  "'");
  VIT_VALUE_CHECK(alpha >= 0.f && alpha <= 1.f, "distillation alpha must be in [0, 1], got ", alpha);
  VIT_VALUE_CHECK(tau > 0.f && std::isfinite(tau), "distillation tau must be positive, got ", tau);
}

void check_teacher(const ViTConfig& t, const ViTConfig& s) {
  VIT_CHECK(t.num_classes == s.num_classes, "the teacher has ", t.num_classes, " classes, the model ",
            s.num_classes);
  VIT_CHECK(t.in_chans == s.in_chans && t.img_h == s.img_h && t.img_w == s.img_w, "the teacher takes ",
            t.in_chans, "x", t.img_h, "x", t.img_w, " images, the model ", s.in_chans, "x", s.img_h, "x",
            s.img_w);
}

namespace {
// log_softmax of one row of K values over temperature t, in double.
void log_softmax(double* out, const float* z, int64_t K, double t) {
  double mx = -INFINITY;
  for (int64_t k = 0; k < K; ++k) mx = std::max(mx, double(z[k]) / t);
  double sum = 0;
  for (int64_t k = 0; k < K; ++k) sum += std::exp(double(z[k]) / t - mx);
  const double lse = mx + std::log(sum);
  for (int64_t k = 0; k < K; ++k) out[k] = double(z[k]) / t - lse;
}
}  // namespace

double distillation_loss(Tensor dstudent, const Tensor& student, const Tensor& teacher,
                         const DistillConfig& c, float scale) {
  VIT_CHECK(student.ndim() == 2, "distillation: student logits must be [B,K], got ",
            shape_str(student.shape));
  check_shape(teacher, student.shape, "distillation: teacher logits");
  check_shape(dstudent, student.shape, "distillation: grad student logits");
  const int64_t B = student.dim(0), K = student.dim(1);
  const bool hard = c.type == "hard";
  // Hard: the cross entropy against the teacher's class at temperature 1; soft: DeiT's
  // tau^2 / (B K) sum of p_t (log p_t - log p_s) at temperature tau.
  const double t = hard ? 1.0 : double(c.tau);
  const double norm = hard ? 1.0 / double(B) : t * t / double(B * K);
  std::vector<double> ls(static_cast<size_t>(K)), lt(static_cast<size_t>(K));
  double loss = 0;
  for (int64_t b = 0; b < B; ++b) {
    const float *zs = student.data + b * K, *zt = teacher.data + b * K;
    float* d = dstudent.data + b * K;
    log_softmax(ls.data(), zs, K, t);
    if (hard) {
      const int64_t y = std::max_element(zt, zt + K) - zt;
      loss -= ls[size_t(y)];
      for (int64_t k = 0; k < K; ++k) d[k] = float(scale * norm * (std::exp(ls[k]) - (k == y ? 1.0 : 0.0)));
      continue;
    }
    log_softmax(lt.data(), zt, K, t);
    for (int64_t k = 0; k < K; ++k) {
      const double pt = std::exp(lt[k]);
      loss += pt * (lt[k] - ls[k]);
      // d/dz_s of tau^2 KL(p_t || p_s(z_s / tau)) = tau (p_s - p_t).
      d[k] = float(scale * norm / t * (std::exp(ls[k]) - pt));
    }
  }
  return loss * norm;
}

}  // namespace vit
