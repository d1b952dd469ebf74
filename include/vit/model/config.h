// ViTConfig: everything that fixes a model's architecture and regularization, with timm's
// vocabulary (global_pool, class_token, drop_path_rate, ...). Saved as JSON beside weights.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

struct ViTConfig {
  int64_t img_h = 224, img_w = 224, in_chans = 3;
  int64_t patch_h = 16, patch_w = 16;
  int64_t embed_dim = 768, depth = 12, num_heads = 12, mlp_dim = 3072;
  bool qkv_bias = true;
  std::string global_pool = "token";  // "token" (class token) or "avg" (mean of patch tokens)
  bool class_token = true;
  std::string pos_embed = "learn";  // "learn" or fixed "sincos"
  float pos_drop_rate = 0.f, attn_drop_rate = 0.f, proj_drop_rate = 0.f;
  float drop_rate = 0.f;       // dropout before the head (timm's head_drop)
  float drop_path_rate = 0.f;  // stochastic depth, linear over depth from 0 to this
  float norm_eps = 1e-6f;
  int64_t num_classes = 1000;
  // Input normalization the model was trained with (per channel; used by data loaders).
  std::vector<float> mean = {0.5f, 0.5f, 0.5f}, std = {0.5f, 0.5f, 0.5f};

  int64_t grid_h() const { return img_h / patch_h; }
  int64_t grid_w() const { return img_w / patch_w; }
  int64_t num_patches() const { return grid_h() * grid_w(); }
  int64_t num_prefix_tokens() const { return class_token ? 1 : 0; }
  int64_t num_tokens() const { return num_patches() + num_prefix_tokens(); }
  int64_t head_dim() const { return embed_dim / num_heads; }
  bool avg_pool() const { return global_pool == "avg"; }
  // Drop-path rate of block i (timm: linspace(0, drop_path_rate, depth)).
  float drop_path_at(int64_t i) const;

  // Throws vit::Error naming the first field that is out of range or inconsistent.
  void validate() const;
  std::string to_json(int indent = 2) const;
  // Unknown keys are an error (a typo must not silently fall back to a default).
  static ViTConfig from_json(const std::string& text);
  static ViTConfig load(const std::string& path);
  void save(const std::string& path) const;
};

// Named presets: vit-tiny-16, vit-small-16, vit-small-32, vit-base-16, vit-base-32,
// vit-large-16, vit-huge-14, mnist-seed, mnist-small, cifar-seed.
ViTConfig preset(const std::string& name);
std::vector<std::string> preset_names();

// Parameter count and forward FLOPs per image (multiply-add = 2 FLOPs; matrix products,
// attention and the head; element-wise ops left out).
int64_t forward_flops(const ViTConfig& c);

}  // namespace vit
