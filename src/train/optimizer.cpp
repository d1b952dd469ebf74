#include "vit/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "vit/core/error.h"
#include "vit/core/threads.h"

namespace vit {

void OptimConfig::validate() const {
  VIT_CHECK(name == "sgd" || name == "adam" || name == "adamw", "optimizer must be sgd, adam or adamw, got '",
            name, "'");
  VIT_CHECK(momentum >= 0.f && momentum < 1.f, "momentum must be in [0, 1), got ", momentum);
  VIT_CHECK(!nesterov || momentum > 0.f, "nesterov needs a momentum above 0");
  VIT_CHECK(beta1 >= 0.f && beta1 < 1.f && beta2 >= 0.f && beta2 < 1.f, "adam betas must be in [0, 1)");
  VIT_CHECK(eps > 0.f, "adam eps must be positive");
  VIT_CHECK(weight_decay >= 0.f, "weight decay must be non-negative, got ", weight_decay);
  VIT_CHECK(layer_decay >= 0.f && layer_decay <= 1.f, "layer decay must be in [0, 1] (0 = off), got ",
            layer_decay);
}

std::vector<float> lr_scales(const ParamTable& table, float layer_decay, bool freeze_backbone) {
  int64_t depth = 0;
  for (const auto& s : table.specs())
    if (s.name.rfind("blocks.", 0) == 0) depth = std::max<int64_t>(depth, std::stoll(s.name.substr(7)) + 1);
  std::vector<float> out;
  for (const auto& s : table.specs()) {
    const bool head = s.name.rfind("head.", 0) == 0;
    if (freeze_backbone && !head) {
      out.push_back(0.f);
      continue;
    }
    if (layer_decay <= 0.f) {
      out.push_back(1.f);
      continue;
    }
    int64_t id = depth + 1;
    for (const char* stem : {"patch_embed.", "cls_token", "reg_token", "pos_embed"})
      if (s.name.rfind(stem, 0) == 0) id = 0;
    if (s.name.rfind("blocks.", 0) == 0) id = std::stoll(s.name.substr(7)) + 1;
    out.push_back(float(std::pow(double(layer_decay), double(depth + 1 - id))));
  }
  return out;
}

Optimizer::Optimizer(const ParamTable& table, OptimConfig cfg) : table_(table), cfg_(std::move(cfg)) {
  cfg_.validate();
  scale_ = lr_scales(table, cfg_.layer_decay, cfg_.freeze_backbone);
  m_.resize(table.total());
  if (cfg_.name != "sgd") v_.resize(table.total());
}

void Optimizer::step(float* params, const float* grads, float lr) {
  ++t_;
  const float wd_all = cfg_.weight_decay;
  // Adam's bias corrections, written as torch.optim.Adam/AdamW compute them.
  const double bc1 = 1.0 - std::pow(double(cfg_.beta1), double(t_));
  const double bc2 = 1.0 - std::pow(double(cfg_.beta2), double(t_));
  const float bc2_sqrt = float(std::sqrt(bc2));
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps, mom = cfg_.momentum;
  const bool first = t_ == 1;
  const float lr0 = lr;
  const std::string& name = cfg_.name;
  // One parallel region for the whole step, each thread a static share of every tensor
  // (no barrier between tensors: they are disjoint), rather than one region per tensor:
  // mnist-seed has 31 tensors of 8 to 1,000 floats, and 31 fork-joins took longer than the
  // arithmetic. Each element's update is the same whatever the threads.
  const int64_t total = int64_t(table_.total());
#pragma omp parallel num_threads(threads_for(total * 8))
  for (size_t k = 0; k < table_.specs().size(); ++k) {
    const ParamSpec& s = table_.specs()[k];
    if (!s.trainable || scale_[k] == 0.f) continue;
    const float lr = lr0 * scale_[k];  // as a timm param group's lr_scale
    const float step_size = float(lr / bc1);
    const float wd = s.decay ? wd_all : 0.f;
    float* p = params + s.offset;
    const float* g = grads + s.offset;
    float* m = m_.data() + s.offset;
    float* v = name == "sgd" ? nullptr : v_.data() + s.offset;
    const int64_t n = s.numel();
    if (name == "sgd") {
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        float d = g[i] + wd * p[i];
        if (mom > 0.f) {
          m[i] = first ? d : mom * m[i] + d;  // torch: buffer starts as the first gradient
          d = cfg_.nesterov ? d + mom * m[i] : m[i];
        }
        p[i] -= lr * d;
      }
    } else if (name == "adamw") {
      // Two loops rather than a branch inside one, so each vectorizes (ViT-B/16's 86M
      // parameters: scalar square roots and divisions took ~3% of a training step).
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        const float gi = g[i];
        p[i] *= 1.f - lr * wd;
        m[i] = b1 * m[i] + (1.f - b1) * gi;
        v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
      }
    } else {
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) {
        const float gi = g[i] + wd * p[i];
        m[i] = b1 * m[i] + (1.f - b1) * gi;
        v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
      }
    }
  }
}

double grad_norm(const ParamTable& table, const float* grads) {
  // Fixed chunks (64K floats, per tensor) summed in parallel, then combined in order: the
  // same bits for any threads. One parallel region over every tensor's chunks.
  const int64_t chunk = 1 << 16;
  // Grown on the first call, then reused: nothing is allocated inside later training steps.
  thread_local std::vector<std::pair<const float*, int64_t>> chunks;  // start, length
  thread_local std::vector<double> part;
  chunks.clear();
  for (const auto& s : table.specs()) {
    if (!s.trainable) continue;
    for (int64_t i = 0; i < s.numel(); i += chunk)
      chunks.push_back({grads + s.offset + i, std::min(chunk, s.numel() - i)});
  }
  part.assign(chunks.size(), 0.0);
  // The worker threads see their own (empty) thread_local vectors: hand them the data.
  const std::pair<const float*, int64_t>* ch = chunks.data();
  double* pt = part.data();
  const int64_t nc = int64_t(chunks.size());
#pragma omp parallel for schedule(static) num_threads(threads_for(int64_t(table.total()) * 2))
  for (int64_t c = 0; c < nc; ++c) {
    double acc = 0;
    for (int64_t i = 0; i < ch[c].second; ++i) acc += double(ch[c].first[i]) * ch[c].first[i];
    pt[c] = acc;
  }
  double total = 0;
  for (double p : part) total += p;
  return std::sqrt(total);
}

double clip_grad_norm(const ParamTable& table, float* grads, double max_norm) {
  const double norm = grad_norm(table, grads);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = float(max_norm / (norm + 1e-6));  // torch adds 1e-6 too
#pragma omp parallel num_threads(threads_for(int64_t(table.total()) * 2))
    for (const auto& s : table.specs()) {
      if (!s.trainable) continue;
      float* g = grads + s.offset;
      const int64_t n = s.numel();
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < n; ++i) g[i] *= scale;
    }
  }
  return norm;
}

}  // namespace vit
