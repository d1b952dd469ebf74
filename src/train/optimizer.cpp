#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "ops/ops.h"

namespace vit {

void OptimConfig::validate() const {
  VIT_VALUE_CHECK(name == "sgd" || name == "adam" || name == "adamw" || name == "lamb" || name == "lambc" ||
                      name == "lion",
                  "optimizer must be sgd, adam, adamw, lamb, lambc or lion, got '", name, "'");
  VIT_VALUE_CHECK(momentum >= 0.f && momentum < 1.f, "momentum must be in [0, 1), got ", momentum);
  VIT_VALUE_CHECK(!nesterov || momentum > 0.f, "nesterov needs a momentum above 0");
  VIT_VALUE_CHECK(beta1 >= 0.f && beta1 < 1.f && beta2 >= 0.f && beta2 < 1.f, "adam betas must be in [0, 1)");
  VIT_VALUE_CHECK(eps > 0.f && std::isfinite(eps), "--opt-eps must be a positive number, got ", eps);
  VIT_VALUE_CHECK(weight_decay >= 0.f && std::isfinite(weight_decay),
                  "--weight-decay must be a non-negative number, got ", weight_decay);
  VIT_VALUE_CHECK(layer_decay >= 0.f && layer_decay <= 1.f, "layer decay must be in [0, 1] (0 = off), got ",
                  layer_decay);
}

std::vector<float> lr_scales(const ParamTable& table, float layer_decay, bool freeze_backbone) {
  int64_t depth = 0;
  for (const auto& s : table.specs())
    if (s.name.rfind("blocks.", 0) == 0) depth = std::max<int64_t>(depth, std::stoll(s.name.substr(7)) + 1);
  std::vector<float> out;
  for (const auto& s : table.specs()) {
    const bool head = is_head_param(s.name);
    if (freeze_backbone && !head) {
      out.push_back(0.f);
      continue;
    }
    if (layer_decay <= 0.f) {
      out.push_back(1.f);
      continue;
    }
    int64_t id = depth + 1;
    for (const char* stem : {"patch_embed.", "cls_token", "dist_token", "reg_token", "pos_embed"})
      if (s.name.rfind(stem, 0) == 0) id = 0;
    if (s.name.rfind("blocks.", 0) == 0) id = std::stoll(s.name.substr(7)) + 1;
    // timm's (r'^norm', MATCH_PREV_GROUP): the final norm (and norm_pre, which the regex also
    // matches) joins the last block's group.
    if (s.name.rfind("norm", 0) == 0) id = depth;
    out.push_back(float(std::pow(double(layer_decay), double(depth + 1 - id))));
  }
  return out;
}

Optimizer::Optimizer(const ParamTable& table, OptimConfig cfg) : table_(table), cfg_(std::move(cfg)) {
  cfg_.validate();
  scale_ = lr_scales(table, cfg_.layer_decay, cfg_.freeze_backbone);
  m_.resize(table.total());
  if (cfg_.second_moment()) v_.resize(table.total());
}

void Optimizer::step(float* params, const float* grads, float lr) {
  ++t_;
  UpdateRule r;
  r.kind = cfg_.name == "sgd"                            ? OptimKind::sgd
           : cfg_.name == "adamw"                        ? OptimKind::adamw
           : cfg_.name == "lamb" || cfg_.name == "lambc" ? OptimKind::lamb
           : cfg_.name == "lion"                         ? OptimKind::lion
                                                         : OptimKind::adam;
  r.beta1 = cfg_.beta1, r.beta2 = cfg_.beta2, r.eps = cfg_.eps;
  r.momentum = cfg_.momentum, r.nesterov = cfg_.nesterov, r.first = t_ == 1;
  // Adam's bias corrections, written as torch.optim.Adam/AdamW compute them.
  r.bias1 = 1.0 - std::pow(double(cfg_.beta1), double(t_));
  r.bias2_sqrt = float(std::sqrt(1.0 - std::pow(double(cfg_.beta2), double(t_))));
  const bool one_moment = !cfg_.second_moment();
  updates_.clear();  // grown on the first step, then reused
  for (size_t k = 0; k < table_.specs().size(); ++k) {
    const ParamSpec& s = table_.specs()[k];
    if (!s.trainable || scale_[k] == 0.f) continue;
    const int64_t o = s.offset;
    // lr as a timm param group's lr_scale
    updates_.push_back({params + o, grads + o, m_.data() + o, one_moment ? nullptr : v_.data() + o, s.numel(),
                        lr * scale_[k], s.decay ? cfg_.weight_decay : 0.f});
  }
  if (r.kind == OptimKind::lamb)
    lamb_step(r, grads);
  else
    ops::optimizer_step(updates_.data(), int64_t(updates_.size()), r);
}

void Optimizer::lamb_step(UpdateRule& r, const float* grads) {
  // timm's Lamb: the gradients divided by max(global norm / 1, 1) (its max_grad_norm of 1),
  // Adam's moments, the update (Adam's step + wd x p) scaled on a tensor with weight decay by
  // ||p|| / ||update|| (1 where either is 0), then p -= lr x that. Tensors in pieces of 64K
  // floats: the norms are summed piece by piece in order, the same on any thread count.
  // lambc: the ratio held to at most 1.
  r.grad_div = float(std::max(grad_norm(table_, grads), 1.0));
  constexpr int64_t kPiece = int64_t(1) << 16;
  pieces_.clear(), owner_.clear();
  for (size_t k = 0; k < updates_.size(); ++k) {
    const ParamUpdate& u = updates_[k];
    for (int64_t i = 0; i < u.n; i += kPiece)
      pieces_.push_back({u.p + i, u.g + i, u.m + i, u.v + i, std::min(kPiece, u.n - i), u.lr, u.wd}),
          owner_.push_back(k);
  }
  const int64_t n = int64_t(pieces_.size());
  sq_.assign(size_t(2 * n), 0.0);
  ops::lamb_moments(pieces_.data(), n, r, sq_.data(), sq_.data() + n);
  ratio_.assign(size_t(n), 1.f);
  for (size_t first = 0; first < pieces_.size();) {
    size_t last = first;
    double uu = 0, pp = 0;
    for (; last < pieces_.size() && owner_[last] == owner_[first]; ++last)
      uu += sq_[last], pp += sq_[n + last];
    // torch: w_norm / g_norm where both are above 0, else 1; only on tensors with weight decay.
    const double w = std::sqrt(pp), g = std::sqrt(uu);
    float ratio = updates_[owner_[first]].wd != 0.f && w > 0 && g > 0 ? float(w / g) : 1.f;
    if (cfg_.name == "lambc") ratio = std::min(ratio, 1.f);  // timm's trust_clip (LAMBC)
    std::fill(ratio_.begin() + int64_t(first), ratio_.begin() + int64_t(last), ratio);
    first = last;
  }
  ops::lamb_apply(pieces_.data(), n, r, ratio_.data());
}

double grad_norm(const ParamTable& table, const float* grads) {
  // Fixed chunks (64K floats, per tensor) summed in parallel, then combined in order: the
  // same bits for any threads.
  const int64_t chunk = 1 << 16;
  // Grown on the first call, then reused: nothing is allocated inside later training steps.
  thread_local std::vector<Span> chunks;
  thread_local std::vector<double> part;
  chunks.clear();
  for (const auto& s : table.specs()) {
    if (!s.trainable) continue;
    for (int64_t i = 0; i < s.numel(); i += chunk)
      chunks.push_back({const_cast<float*>(grads) + s.offset + i, std::min(chunk, s.numel() - i)});
  }
  part.assign(chunks.size(), 0.0);
  ops::sums_of_squares(part.data(), chunks.data(), int64_t(chunks.size()));
  double total = 0;
  for (double p : part) total += p;
  return std::sqrt(total);
}

void clip_grad_value(const ParamTable& table, float* grads, float limit) {
  thread_local std::vector<Span> spans;
  spans.clear();
  for (const auto& s : table.specs())
    if (s.trainable) spans.push_back({grads + s.offset, s.numel()});
  ops::clamp_spans(spans.data(), int64_t(spans.size()), limit);
}

int64_t adaptive_clip_grad(const ParamTable& table, const float* params, float* grads, float clip_factor,
                           float eps) {
  // Every unit's rows of weights and gradients, their sums of squares in parallel, then the
  // rows whose gradients are too large scaled each by its own factor. Grown on the first
  // call, then reused.
  thread_local std::vector<Span> rows, clipped;
  thread_local std::vector<double> sq;
  thread_local std::vector<float> scales;
  rows.clear(), clipped.clear(), scales.clear();
  const auto& specs = table.specs();
  const size_t body = specs.size() >= 2 ? specs.size() - 2 : 0;
  for (size_t k = 0; k < body; ++k) {
    const ParamSpec& s = specs[k];
    if (!s.trainable || s.numel() == 0) continue;
    const int64_t units = s.shape.size() <= 1 ? 1 : s.shape[0], len = s.numel() / units;
    for (int64_t u = 0; u < units; ++u)
      rows.push_back({const_cast<float*>(params) + s.offset + u * len, len});
  }
  const size_t n = rows.size();
  for (size_t i = 0; i < n; ++i) rows.push_back({grads + (rows[i].data - params), rows[i].n});
  sq.assign(rows.size(), 0.0);
  ops::sums_of_squares(sq.data(), rows.data(), int64_t(rows.size()));
  for (size_t i = 0; i < n; ++i) {
    const double max_norm = std::max(std::sqrt(sq[i]), double(eps)) * clip_factor;
    const double norm = std::sqrt(sq[n + i]);
    if (norm < max_norm) continue;
    clipped.push_back(rows[n + i]);
    scales.push_back(float(max_norm / std::max(norm, 1e-6)));
  }
  ops::scale_each_span(clipped.data(), scales.data(), int64_t(clipped.size()));
  return int64_t(clipped.size());
}

double clip_grad_norm(const ParamTable& table, float* grads, double max_norm) {
  const double norm = grad_norm(table, grads);
  if (max_norm > 0 && norm > max_norm) {
    const float scale = float(max_norm / (norm + 1e-6));  // torch adds 1e-6 too
    thread_local std::vector<Span> spans;
    spans.clear();
    for (const auto& s : table.specs())
      if (s.trainable) spans.push_back({grads + s.offset, s.numel()});
    ops::scale_spans(spans.data(), int64_t(spans.size()), scale);
  }
  return norm;
}

}  // namespace vit
