// ViTConfig: everything that fixes a model's architecture and regularization, with timm's
// vocabulary (global_pool, class_token, drop_path_rate, ...). Saved as JSON beside weights.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/activation.h"

namespace vit {

struct ViTConfig {
  int64_t img_h = 224, img_w = 224, in_chans = 3;
  int64_t patch_h = 16, patch_w = 16;
  int64_t embed_dim = 768, depth = 12, num_heads = 12, mlp_dim = 3072;
  // Width of each attention head; 0 means embed_dim / num_heads (timm, Hugging Face). Set, the
  // attention works in num_heads * dim_head channels (qkv [3 * that, D], proj [D, that]), as
  // vit-pytorch's dim_head (its default 64 whatever the width).
  int64_t dim_head = 0;
  bool qkv_bias = true;
  // "token" (class token), "avg" (mean of patch tokens) or "map" (timm's AttentionPoolLatent,
  // SigLIP's: one learned query attends over every normed token, then a projection and a
  // residual MLP; its tensors attn_pool.*)
  std::string global_pool = "token";
  bool class_token = true;
  int64_t reg_tokens = 0;  // register tokens after the class token (timm's reg_tokens)
  // DeiT's distillation token (`dist_token`, timm's VisionTransformerDistilled, transformers'
  // DeiT): a learned token right after the class token, with its own pos_embed row.
  bool dist_token = false;
  // The distilled head: `head` on the class token and `head_dist` on the distillation token,
  // the logits their mean (timm outside distillation training; transformers'
  // DeiTForImageClassificationWithTeacher), the features the mean of the two normed tokens.
  // Without it the head reads the class token alone (transformers' DeiTForImageClassification).
  bool head_dist = false;
  // "learn", or fixed: "sincos" (the seeds' 1-D table over every token) or "sincos2d"
  // (big_vision's and vit-pytorch SimpleViT's 2-D table over the patch grid; prefix rows 0)
  std::string pos_embed = "learn";
  bool no_embed_class = false;  // pos_embed covers the patch tokens only (timm's no_embed_class)
  bool pre_norm = false;        // LayerNorm `norm_pre` after the position embedding (timm's pre_norm)
  bool patch_bias = true;       // patch_embed.proj.bias (timm leaves it out when pre_norm)
  // vit-pytorch's patch embedding: a LayerNorm over each flattened patch before the projection
  // (patch_embed.norm_in, patch_dim() wide) and one over its output
  // (patch_embed.norm, as timm names PatchEmbed's norm).
  bool patch_norm = false;
  // Average or attention pooling over every token, the class and register tokens too
  // (vit-pytorch's pool='mean'; timm 1.0's pool_include_prefix); by default they are left out.
  bool pool_include_prefix = false;
  // Final LayerNorm after pooling (`fc_norm`) instead of before it (`norm`); unset means
  // timm's default: fc_norm exactly for avg pooling. use_fc_norm() resolves it.
  std::optional<bool> fc_norm;
  float init_values = 0.f;  // LayerScale (ls1.gamma, ls2.gamma) initial value; 0 = none
  float pos_drop_rate = 0.f, attn_drop_rate = 0.f, proj_drop_rate = 0.f;
  float drop_rate = 0.f;       // dropout before the head (timm's head_drop)
  float drop_path_rate = 0.f;  // stochastic depth, linear over depth from 0 to this
  float norm_eps = 1e-6f;
  // The MLP's activation (timm's act_layer): "gelu" (exact), "gelu_tanh" or "quick_gelu".
  std::string act_layer = "gelu";
  int64_t num_classes = 1000;
  // Input preprocessing the model was trained with (timm's pretrained_cfg): per-channel
  // mean and std, the resize filter, and how images reach the input size: "squash"
  // resizes both sides to size / crop_pct, "center" the shorter side, each followed by a
  // center crop to the input size.
  std::vector<float> mean = {0.5f, 0.5f, 0.5f}, std = {0.5f, 0.5f, 0.5f};
  std::string interpolation = "bilinear";  // bilinear, bicubic, lanczos, box, hamming, nearest
  double crop_pct = 1.0;                   // a double, as timm's Python float: 224 / (224 / 240) is 240
  std::string crop_mode = "squash";        // or "center"

  int64_t grid_h() const { return img_h / patch_h; }
  int64_t grid_w() const { return img_w / patch_w; }
  int64_t num_patches() const { return grid_h() * grid_w(); }
  int64_t num_prefix_tokens() const { return (class_token ? 1 : 0) + (dist_token ? 1 : 0) + reg_tokens; }
  // Tokens the head reads: the class token, and with head_dist the distillation token.
  int64_t head_tokens() const { return head_dist ? 2 : 1; }
  int64_t num_tokens() const { return num_patches() + num_prefix_tokens(); }
  // The first token average pooling averages and the attention pool reads (timm 1.0's pool():
  // the patches, every token with pool_include_prefix).
  int64_t first_pooled() const { return pool_include_prefix ? 0 : num_prefix_tokens(); }
  int64_t patch_dim() const { return in_chans * patch_h * patch_w; }
  // Rows of pos_embed: every token, or only the patches with no_embed_class.
  int64_t pos_embed_len() const { return no_embed_class ? num_patches() : num_tokens(); }
  bool layer_scale() const { return init_values > 0.f; }
  int64_t head_dim() const { return dim_head > 0 ? dim_head : embed_dim / num_heads; }
  // The attention's width: q, k, v and the heads' output (embed_dim unless dim_head says otherwise).
  int64_t attn_dim() const { return num_heads * head_dim(); }
  bool avg_pool() const { return global_pool == "avg"; }
  bool map_pool() const { return global_pool == "map"; }
  bool use_fc_norm() const { return fc_norm.value_or(avg_pool()); }
  // `norm` on every token before pooling: avg pooling without fc_norm, and the attention pool.
  bool norm_all_tokens() const { return !use_fc_norm() && (avg_pool() || map_pool()); }
  Activation activation() const { return activation_from_name(act_layer); }
  // Drop-path rate of block i (timm: linspace(0, drop_path_rate, depth)).
  float drop_path_at(int64_t i) const;

  // Throws vit::Error naming the first field that is out of range or inconsistent.
  void validate() const;
  std::string to_json(int indent = 2) const;
  // One line for people: input, patches, blocks, width, heads, pooling, classes, and the
  // options that are not timm's defaults (vit train's "model:" line; config.json has all).
  std::string summary() const;
  // Unknown keys are an error (a typo must not silently fall back to a default).
  static ViTConfig from_json(const std::string& text);
  static ViTConfig load(const std::string& path);
  void save(const std::string& path) const;
};

// The resize filters preprocessing knows (Pillow's names).
bool known_interpolation(const std::string& name);

// Named presets: vit-tiny-16, vit-small-16, vit-small-32, vit-base-16, vit-base-32,
// vit-large-16, vit-huge-14, mnist-seed, mnist-small, cifar-seed; and timm's names
// vit_{tiny,small,base,large,huge}_patch{P}_{R} (vit_base_patch16_224: vit-base-16),
// deit_{tiny,small,base}_patch{P}_{R} and deit_{tiny,small,base}_distilled_patch{P}_{R}
// (dist_token, head_dist). An unknown name throws, suggesting the nearest preset.
ViTConfig preset(const std::string& name);
std::vector<std::string> preset_names();

// Parameter count and forward FLOPs per image (multiply-add = 2 FLOPs; matrix products,
// attention and the head; element-wise ops left out): the model's count, as PyTorch's
// profilers give it. cls_tail: what vitcpp runs with its class-token tail (the last block
// after qkv on the rows the head reads alone, head_tokens(); ViT::use_cls_tail).
int64_t forward_flops(const ViTConfig& c, bool cls_tail = false);

}  // namespace vit
