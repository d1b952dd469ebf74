// Learning-rate schedules by optimizer step: constant, step decay, decay at milestones, and
// cosine, each with an optional linear warmup from warmup_lr. Cosine decays from lr to
// min_lr after warmup (timm's CosineLRScheduler without restarts, per update).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

struct ScheduleConfig {
  std::string name = "cosine";  // none | step | multistep | cosine
  float lr = 1e-3f;
  float min_lr = 0.f;     // cosine floor
  float warmup_lr = 0.f;  // lr at step 0 of the warmup
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;  // cosine length, warmup included
  // step: multiply by decay_rate every decay_steps (a fraction too: timm's decay_t, decay_epochs
  // times the steps of an epoch), counted from step 0
  double decay_steps = 1;
  // multistep: multiply by decay_rate at each of these steps (ascending), counted from step
  // 0, with timm's MultiStepLRScheduler's convention: milestone m applies from step m - 1.
  std::vector<int64_t> milestones;
  float decay_rate = 0.1f;
  void validate() const;
};

float lr_at(const ScheduleConfig& s, int64_t step);

}  // namespace vit
