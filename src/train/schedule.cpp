#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace vit {

void ScheduleConfig::validate() const {
  VIT_VALUE_CHECK(name == "none" || name == "step" || name == "multistep" || name == "cosine",
                  "schedule must be none, step, multistep or cosine, got '", name, "'");
  VIT_VALUE_CHECK(
      std::is_sorted(milestones.begin(), milestones.end()) && (milestones.empty() || milestones.front() > 0),
      "schedule milestones must be positive and ascending");
  VIT_VALUE_CHECK(lr > 0.f && std::isfinite(lr), "--lr (the learning rate) must be a positive number, got ",
                  lr);
  // The cosine's floor: another schedule has none (and says --min-lr has no effect there).
  VIT_VALUE_CHECK(min_lr >= 0.f && (name != "cosine" || min_lr <= lr), "--min-lr must be in [0, --lr ", lr,
                  "], got ", min_lr);
  VIT_VALUE_CHECK(warmup_lr >= 0.f && std::isfinite(warmup_lr), "warmup lr must be >= 0, got ", warmup_lr);
  VIT_VALUE_CHECK(warmup_steps >= 0 && total_steps > 0 && decay_steps > 0,
                  "schedule lengths must be positive");
  VIT_VALUE_CHECK(decay_rate > 0.f && std::isfinite(decay_rate),
                  "--decay-rate must be a positive number, got ", decay_rate);
}

float lr_at(const ScheduleConfig& s, int64_t step) {
  if (step < s.warmup_steps) return s.warmup_lr + (s.lr - s.warmup_lr) * float(step) / float(s.warmup_steps);
  // Step decay counts from the run's start, as timm's StepLRScheduler (the warmup only
  // overrides the first steps); cosine runs over the steps after the warmup.
  // timm's StepLRScheduler: decay_rate ** (t // decay_t), a floor division of floats
  if (s.name == "step") return s.lr * std::pow(s.decay_rate, float(std::floor(double(step) / s.decay_steps)));
  if (s.name == "multistep") {
    const auto passed =
        std::upper_bound(s.milestones.begin(), s.milestones.end(), step + 1) - s.milestones.begin();
    return s.lr * std::pow(s.decay_rate, float(passed));
  }
  const int64_t t = step - s.warmup_steps;
  if (s.name == "cosine") {
    const int64_t span = std::max<int64_t>(1, s.total_steps - s.warmup_steps);
    const double frac = std::min(1.0, double(t) / double(span));
    return float(s.min_lr + 0.5 * (s.lr - s.min_lr) * (1.0 + std::cos(M_PI * frac)));
  }
  return s.lr;
}

}  // namespace vit
