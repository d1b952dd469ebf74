// The parameter table: the single list of {timm name, shape, init, weight decay, trainable}
// for a config. It alone decides the layout of the parameter, gradient and optimizer
// arenas, the names in checkpoints and the weight-decay groups. Adding a tensor is one line
// in ParamTable's constructor, with the Weights field it binds to (model/weights.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/weights.h"

namespace vit {

enum class Init {
  TruncNormal,  // trunc_normal_(std=0.02), timm's linear weights and learned pos_embed
  Zeros,        // biases
  Ones,         // LayerNorm weights
  ClsToken,     // normal_(std=1e-6)
  ConvDefault,  // PyTorch Conv2d default: uniform(+-1/sqrt(fan_in)), weight and bias
  LayerScale,   // init_values (timm's LayerScale gamma)
  SinCos,       // fixed sin/cos position table (not trained)
  SinCos2d,     // fixed 2-D sin/cos table over the patch grid (not trained)
  Latent,       // the attention pool's query: trunc_normal_tf_(std=embed_dim^-0.5), within 2 std
};

struct ParamSpec {
  std::string name;
  Shape shape;
  Init init;
  bool decay;      // in the weight-decay group (timm: ndim >= 2, not pos_embed/cls_token/reg_token)
  bool trainable;  // false for a fixed sincos pos_embed
  int64_t offset;  // in floats, into every arena laid out by this table
  Slot slot;       // the Weights field it binds to (bind_weights)
  int64_t numel() const { return vit::numel(shape); }
};

class ParamTable {
 public:
  explicit ParamTable(const ViTConfig& cfg);
  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t total() const { return total_; }
  // nullptr when absent.
  const ParamSpec* find(const std::string& name) const;
  // Throws vit::Error when absent.
  const ParamSpec& at(const std::string& name) const;

 private:
  void add(std::string name, Shape shape, Init init, Slot slot);
  std::vector<ParamSpec> specs_;
  int64_t total_ = 0;
};

// Fills the parameter arena as timm's default init does, from a seeded generator.
// The classifier's parameters: head.* and a distilled model's head_dist.* (what a new head
// replaces, what training with a frozen backbone updates).
bool is_head_param(const std::string& name);

// Views of the arena at `base` (parameters, gradients: any arena this table lays out), each
// in the field its entry's Slot names; the fields of absent tensors stay null.
Weights bind_weights(const ParamTable& table, const ViTConfig& cfg, float* base);

void init_params(const ParamTable& table, const ViTConfig& cfg, float* params, uint64_t seed);
// The fixed position table [T, C]: pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(...).
void sincos_pos_embed(float* out, int64_t T, int64_t C);
// big_vision's posemb_sincos_2d (vit-pytorch's SimpleViT) over a gh x gw grid after `prefix`
// zero rows, [prefix + gh*gw, C]: with w_k = 10000^(-k/(C/4-1)), k < C/4, the patch at row y,
// column x gets [sin(x w), cos(x w), sin(y w), cos(y w)].
void sincos2d_pos_embed(float* out, int64_t prefix, int64_t gh, int64_t gw, int64_t C);

}  // namespace vit
