// The model's parameters: one arena of every tensor the table (params.cpp) lists, the views
// (Weights) bound to it by the table's slots (params.cpp), the fp32 linear layers over them, and the
// constructor.
#include "core/settings.h"
#include "model/vit.h"

namespace vit {

ViT::ViT(const ViTConfig& cfg, bool randomize) : cfg_(cfg), table_(cfg) {
  check_settings();  // a bad VIT_* value stops here, not in a kernel's parallel region
  params_.resize(table_.total());
  grads_.resize(table_.total());
  W_ = bind(params_.data());
  G_ = bind(grads_.data());
  bind_linears();
  if (randomize) init_weights(0);
}

Tensor ViT::param(const std::string& name) {
  const auto& s = table_.at(name);
  return Tensor(params_.data() + s.offset, s.shape);
}

Tensor ViT::grad(const std::string& name) {
  const auto& s = table_.at(name);
  return Tensor(grads_.data() + s.offset, s.shape);
}

void ViT::init_weights(uint64_t seed) {
  init_params(table_, cfg_, params_.data(), seed);
}

ViT::Weights ViT::bind(float* base) {
  return bind_weights(table_, cfg_, base);
}

void ViT::bind_linears() {
  lin_.patch = {W_.patch_w, W_.patch_b};
  lin_.head = {W_.head_w, W_.head_b};
  lin_.head_dist = {W_.head_dist_w, W_.head_dist_b};
  const PoolWeights& p = W_.pool;
  lin_.pool = {{p.qw, p.qb}, {p.kvw, p.kvb}, {p.projw, p.projb}, {p.fc1w, p.fc1b}, {p.fc2w, p.fc2b}};
  lin_.infer.clear();
  for (const BlockWeights& w : W_.blocks)
    lin_.infer.push_back({{w.qkvw, w.qkvb}, {w.projw, w.projb}, {w.fc1w, w.fc1b}, {w.fc2w, w.fc2b}});
  lin_.train = lin_.infer;
}

}  // namespace vit
