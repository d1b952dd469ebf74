#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include "core/check.h"
#include "core/decimal.h"
#include "core/file.h"
#include "core/json_number.h"
#include "core/json_parse.h"
#include "core/suggest.h"

namespace vit {

using json = nlohmann::json;

float ViTConfig::drop_path_at(int64_t i) const {
  // timm's torch.linspace(0, drop_path_rate, depth): [0] for a single block.
  return depth > 1 ? drop_path_rate * float(i) / float(depth - 1) : 0.f;
}

void ViTConfig::validate() const {
  // Bounds far above any real ViT (ViT-22B: embed 6144, depth 48), so that sizes computed
  // from them (tokens x dim, parameter counts) cannot overflow int64.
  for (auto [name, v, most] : {std::tuple{"img_size", std::max(img_h, img_w), int64_t(1) << 16},
                               {"in_chans", in_chans, int64_t(1) << 10},
                               {"embed_dim", embed_dim, int64_t(1) << 16},
                               {"depth", depth, int64_t(1) << 10},
                               {"mlp_dim", mlp_dim, int64_t(1) << 18},
                               {"dim_head", dim_head, int64_t(1) << 16},
                               {"num_classes", num_classes, int64_t(1) << 24},
                               {"reg_tokens", reg_tokens, int64_t(1) << 10}})
    VIT_CHECK(v <= most, "config: ", name, " ", v, " is implausibly large (at most ", most, ")");
  VIT_CHECK(img_h > 0 && img_w > 0, "config: img_size must be positive, got ", img_h, "x", img_w);
  VIT_CHECK(in_chans > 0, "config: in_chans must be positive, got ", in_chans);
  VIT_CHECK(patch_h > 0 && patch_w > 0, "config: patch_size must be positive, got ", patch_h, "x", patch_w);
  // A size that is not a multiple of the patch: the grid is floored and the last rows and
  // columns of pixels are not read, as the Conv2d patch embedding of timm and transformers
  // reads them (SigLIP so400m/14 at 384: 27x27 patches of 14, 6 pixels left). vit-pytorch's
  // patch embedding (patch_norm) refuses such a size itself, and the ONNX graph reshapes.
  VIT_CHECK(img_h >= patch_h && img_w >= patch_w, "config: image size ", img_h, "x", img_w,
            " is smaller than one patch (", patch_h, "x", patch_w, ")");
  VIT_CHECK(!patch_norm || (img_h % patch_h == 0 && img_w % patch_w == 0), "config: image size ", img_h, "x",
            img_w, " is not divisible by patch size ", patch_h, "x", patch_w,
            " (vit-pytorch's patch embedding, patch_norm, cuts the image into whole patches)");
  VIT_CHECK(embed_dim > 0 && depth > 0 && mlp_dim > 0,
            "config: embed_dim, depth and mlp_dim must be positive");
  VIT_CHECK(num_classes >= 0, "config: num_classes must be positive, or 0 for a model without a head, got ",
            num_classes);
  VIT_CHECK(num_heads > 0 && num_heads <= (int64_t(1) << 12), "config: num_heads must be in [1, 4096], got ",
            num_heads);
  VIT_CHECK(dim_head >= 0, "config: dim_head must be positive (or 0: embed_dim / num_heads), got ", dim_head);
  VIT_CHECK(dim_head > 0 || embed_dim % num_heads == 0, "config: num_heads ", num_heads,
            " does not divide embed_dim ", embed_dim, " (dim_head sets the heads' width apart from it)");
  VIT_CHECK(global_pool == "token" || global_pool == "avg" || global_pool == "map",
            "config: global_pool must be 'token', 'avg' or 'map', got '", global_pool, "'");
  VIT_CHECK(global_pool != "token" || class_token, "config: global_pool 'token' needs class_token");
  VIT_CHECK(
      !pool_include_prefix || global_pool != "token",
      "config: pool_include_prefix is for global_pool 'avg' or 'map' (token pooling takes the class token "
      "alone)");
  // timm's AttentionPoolLatent: its heads split embed_dim, and `norm` comes before it.
  VIT_CHECK(!map_pool() || embed_dim % num_heads == 0, "config: global_pool 'map' needs num_heads ",
            num_heads, " to divide embed_dim ", embed_dim, " (the attention pool's heads split it)");
  VIT_CHECK(!map_pool() || !fc_norm.value_or(false),
            "config: global_pool 'map' with fc_norm (in timm: no norm before the attention pool, fc_norm "
            "after it) is not supported; no timm model uses it. Leave fc_norm unset: the tokens are "
            "normed before the pool");
  VIT_CHECK(reg_tokens >= 0, "config: reg_tokens must be non-negative, got ", reg_tokens);
  // As timm's VisionTransformerDistilled: class token, distillation token, patches, every
  // one with a position embedding; token pooling.
  VIT_CHECK(!dist_token || (class_token && global_pool == "token" && reg_tokens == 0 && !no_embed_class),
            "config: dist_token (DeiT) needs class_token, global_pool 'token', no register tokens and a "
            "position embedding on every token (no_embed_class false)");
  VIT_CHECK(!head_dist || dist_token, "config: head_dist needs dist_token");
  VIT_CHECK(!head_dist || drop_rate == 0.f,
            "config: drop_rate must be 0 with head_dist (timm's distilled head has no dropout), got ",
            drop_rate);
  VIT_CHECK(init_values >= 0.f, "config: init_values (LayerScale) must be non-negative, got ", init_values);
  VIT_CHECK(is_activation_name(act_layer),
            "config: act_layer must be 'gelu', 'gelu_tanh' or 'quick_gelu', got '", act_layer, "'");
  VIT_CHECK(known_interpolation(interpolation), "config: unknown interpolation '", interpolation,
            "' (bilinear, bicubic, lanczos, box, hamming, nearest)");
  VIT_CHECK(crop_pct > 0 && crop_pct <= 1, "config: crop_pct must be in (0, 1], got ", crop_pct);
  VIT_CHECK(crop_mode == "center" || crop_mode == "squash",
            "config: crop_mode must be 'center' or 'squash', got '", crop_mode, "'");
  VIT_CHECK(pos_embed == "learn" || pos_embed == "sincos" || pos_embed == "sincos2d",
            "config: pos_embed must be 'learn', 'sincos' or 'sincos2d', got '", pos_embed, "'");
  VIT_CHECK(
      pos_embed != "sincos2d" || (embed_dim % 4 == 0 && embed_dim >= 8),
      "config: pos_embed 'sincos2d' needs embed_dim a multiple of 4, at least 8 (a quarter each for sin "
      "and cos of x and y), got ",
      embed_dim);
  for (auto [name, v] : {std::pair{"pos_drop_rate", pos_drop_rate},
                         {"attn_drop_rate", attn_drop_rate},
                         {"proj_drop_rate", proj_drop_rate},
                         {"drop_rate", drop_rate},
                         {"drop_path_rate", drop_path_rate}})
    VIT_CHECK(v >= 0.f && v < 1.f, "config: ", name, " must be in [0, 1), got ", v);
  VIT_CHECK(norm_eps > 0.f, "config: norm_eps must be positive");
  VIT_CHECK(mean.size() == size_t(in_chans) && std.size() == size_t(in_chans), "config: mean and std need ",
            in_chans, " values (one per channel)");
  for (float s : std) VIT_CHECK(s > 0.f && std::isfinite(s), "config: std values must be positive, got ", s);
  for (float m : mean) VIT_CHECK(std::isfinite(m), "config: mean values must be finite, got ", m);
}

namespace {
// Floats as the shortest decimal that reads back to the same float (0.1307, not
// 0.1307000070810318).
double tidy(float f) {
  return shortest_decimal(f);
}
std::vector<double> tidy(const std::vector<float>& v) {
  std::vector<double> out;
  for (float f : v) out.push_back(tidy(f));
  return out;
}
}  // namespace

std::string ViTConfig::to_json(int indent) const {
  json j = {{"img_size", {img_h, img_w}},
            {"in_chans", in_chans},
            {"patch_size", {patch_h, patch_w}},
            {"embed_dim", embed_dim},
            {"depth", depth},
            {"num_heads", num_heads},
            {"mlp_dim", mlp_dim},
            {"qkv_bias", qkv_bias},
            {"global_pool", global_pool},
            {"class_token", class_token},
            {"reg_tokens", reg_tokens},
            {"pos_embed", pos_embed},
            {"no_embed_class", no_embed_class},
            {"pre_norm", pre_norm},
            {"patch_bias", patch_bias},
            {"fc_norm", use_fc_norm()},
            {"init_values", tidy(init_values)},
            {"pos_drop_rate", tidy(pos_drop_rate)},
            {"attn_drop_rate", tidy(attn_drop_rate)},
            {"proj_drop_rate", tidy(proj_drop_rate)},
            {"drop_rate", tidy(drop_rate)},
            {"drop_path_rate", tidy(drop_path_rate)},
            {"norm_eps", tidy(norm_eps)},
            {"num_classes", num_classes},
            {"mean", tidy(mean)},
            {"std", tidy(std)},
            {"interpolation", interpolation},
            {"crop_pct", crop_pct},
            {"crop_mode", crop_mode}};
  // Written only where it changes the model, so that every other config reads as before.
  if (attn_dim() != embed_dim) j["dim_head"] = head_dim();
  if (patch_norm) j["patch_norm"] = true;
  if (pool_include_prefix) j["pool_include_prefix"] = true;
  if (act_layer != "gelu") j["act_layer"] = act_layer;
  if (dist_token) j["dist_token"] = true;
  if (head_dist) j["head_dist"] = true;
  return j.dump(indent);
}

namespace {
// An integer field (json_int: integral floats such as 768.0 too, nothing out of range).
int64_t as_int(const json& v, const std::string& key) {
  VIT_CHECK(v.is_number(), "config: wrong value type: ", key, " must be an integer, got ", v.dump());
  return json_int(v, "config: " + key);
}

// "img_size": 224 or [224, 224].
void read_pair(const json& v, int64_t& a, int64_t& b, const char* key) {
  if (v.is_number()) {
    a = b = as_int(v, key);
  } else {
    VIT_CHECK(v.is_array() && v.size() == 2, "config: ", key, " must be an integer or [h, w]");
    a = as_int(v[0], key);
    b = as_int(v[1], key);
  }
}
}  // namespace

std::string ViTConfig::summary() const {
  auto pair = [](int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); };
  std::ostringstream s;
  s << pair(img_h, img_w) << "x" << in_chans << " images, " << pair(patch_h, patch_w) << " patches ("
    << num_patches() << "), " << depth << (depth == 1 ? " block" : " blocks") << " of width " << embed_dim
    << ", " << num_heads << (num_heads == 1 ? " head" : " heads");
  if (dim_head > 0) s << " of width " << dim_head;
  s << ", MLP " << mlp_dim;
  if (act_layer != "gelu") s << " (" << act_layer << ")";
  if (!class_token) s << ", no class token";
  if (reg_tokens > 0) s << ", " << reg_tokens << " register tokens";
  if (dist_token) s << ", distillation token";
  s << ", " << (map_pool() ? "attention" : avg_pool() ? "mean" : "class-token") << " pooling";
  if (pool_include_prefix) s << " over every token";
  if (use_fc_norm()) s << " then fc_norm";
  if (pos_embed != "learn") s << ", " << pos_embed << " positions";
  if (layer_scale()) s << ", LayerScale " << tidy(init_values);
  if (drop_path_rate > 0.f && depth > 1) s << ", drop path " << tidy(drop_path_rate);  // (none on one block)
  if (drop_rate > 0.f) s << ", dropout " << tidy(drop_rate);
  if (attn_drop_rate > 0.f) s << ", attention dropout " << tidy(attn_drop_rate);
  s << ", " << num_classes << (num_classes == 1 ? " class" : " classes");
  return s.str();
}

ViTConfig ViTConfig::from_json(const std::string& text) {
  json j;
  try {
    j = parse_json(text, "config");
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    throw Error(std::string("config: invalid JSON: ") + e.what());
  }
  VIT_CHECK(j.is_object(), "config: expected a JSON object");
  ViTConfig c;
  try {
    for (auto& [key, v] : j.items()) {
      if (key == "img_size")
        read_pair(v, c.img_h, c.img_w, "img_size");
      else if (key == "patch_size")
        read_pair(v, c.patch_h, c.patch_w, "patch_size");
      else if (key == "in_chans")
        c.in_chans = as_int(v, key);
      else if (key == "embed_dim")
        c.embed_dim = as_int(v, key);
      else if (key == "depth")
        c.depth = as_int(v, key);
      else if (key == "num_heads")
        c.num_heads = as_int(v, key);
      else if (key == "dim_head")
        c.dim_head = as_int(v, key);
      else if (key == "mlp_dim")
        c.mlp_dim = as_int(v, key);
      else if (key == "qkv_bias")
        c.qkv_bias = v.get<bool>();
      else if (key == "global_pool")
        c.global_pool = v.get<std::string>();
      else if (key == "class_token")
        c.class_token = v.get<bool>();
      else if (key == "reg_tokens")
        c.reg_tokens = as_int(v, key);
      else if (key == "dist_token")
        c.dist_token = v.get<bool>();
      else if (key == "head_dist")
        c.head_dist = v.get<bool>();
      else if (key == "pos_embed")
        c.pos_embed = v.get<std::string>();
      else if (key == "no_embed_class")
        c.no_embed_class = v.get<bool>();
      else if (key == "pre_norm")
        c.pre_norm = v.get<bool>();
      else if (key == "patch_bias")
        c.patch_bias = v.get<bool>();
      else if (key == "patch_norm")
        c.patch_norm = v.get<bool>();
      else if (key == "pool_include_prefix")
        c.pool_include_prefix = v.get<bool>();
      else if (key == "fc_norm")
        c.fc_norm = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
      else if (key == "init_values")
        c.init_values = v.is_null() ? 0.f : v.get<float>();
      else if (key == "interpolation")
        c.interpolation = v.get<std::string>();
      else if (key == "crop_pct")
        c.crop_pct = v.get<double>();
      else if (key == "crop_mode")
        c.crop_mode = v.get<std::string>();
      else if (key == "pos_drop_rate")
        c.pos_drop_rate = v.get<float>();
      else if (key == "attn_drop_rate")
        c.attn_drop_rate = v.get<float>();
      else if (key == "proj_drop_rate")
        c.proj_drop_rate = v.get<float>();
      else if (key == "drop_rate")
        c.drop_rate = v.get<float>();
      else if (key == "drop_path_rate")
        c.drop_path_rate = v.get<float>();
      else if (key == "norm_eps")
        c.norm_eps = v.get<float>();
      else if (key == "act_layer")
        c.act_layer = v.get<std::string>();
      else if (key == "num_classes")
        c.num_classes = as_int(v, key);
      else if (key == "mean")
        c.mean = v.get<std::vector<float>>();
      else if (key == "std")
        c.std = v.get<std::vector<float>>();
      else
        throw Error("config: unknown key '" + key + "'");
    }
  } catch (const json::type_error& e) {
    throw Error(std::string("config: wrong value type: ") + e.what());
  }
  // One-channel models whose file gave no mean/std get one value per channel.
  if (!j.contains("mean")) c.mean.assign(c.in_chans, 0.5f);
  if (!j.contains("std")) c.std.assign(c.in_chans, 0.5f);
  c.validate();
  return c;
}

ViTConfig ViTConfig::load(const std::string& path) {
  const std::string text = read_text_file(path);  // its errors name the file already
  try {
    return from_json(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

bool known_interpolation(const std::string& name) {
  for (const char* k : {"bilinear", "bicubic", "lanczos", "box", "hamming", "nearest"})
    if (name == k) return true;
  return false;
}

void ViTConfig::save(const std::string& path) const {
  write_file_atomic(path, to_json() + "\n");
}

namespace {
ViTConfig timm_vit(int64_t patch, int64_t dim, int64_t depth, int64_t heads) {
  ViTConfig c;
  c.patch_h = c.patch_w = patch;
  c.embed_dim = dim;
  c.depth = depth;
  c.num_heads = heads;
  c.mlp_dim = 4 * dim;
  // timm's preprocessing for its ViTs (vision_transformer.py's _cfg, at 224): bicubic, a
  // center crop of 0.9, Inception's mean and std (0.5, the default here).
  c.interpolation = "bicubic";
  c.crop_mode = "center";
  c.crop_pct = 0.9;
  return c;
}

// timm's names: vit_{tiny,small,base,large,huge}_patch{P}_{R} (vit_base_patch16_224,
// vit_small_patch32_384, ...): the size's width, depth and heads with patch P and R x R
// images; DeiT's deit_{tiny,small,base}_patch{P}_{R} the same, and
// deit_{tiny,small,base}_distilled_patch{P}_{R} with the distillation token and second head.
// Empty when name is not one of them.
std::optional<ViTConfig> timm_named(const std::string& name) {
  static const std::regex re(
      "(?:vit_(tiny|small|base|large|huge)|deit_(tiny|small|base)(_distilled)?)_patch([0-9]+)_([0-9]+)");
  std::smatch m;
  if (!std::regex_match(name, m, re) || m[4].length() > 6 || m[5].length() > 6) return std::nullopt;
  const std::string size = m[1].matched ? m[1] : m[2];
  const int64_t patch = std::stoll(m[4]), res = std::stoll(m[5]);
  if (patch <= 0 || res <= 0 || res % patch != 0) return std::nullopt;
  ViTConfig c = size == "tiny"    ? timm_vit(patch, 192, 12, 3)
                : size == "small" ? timm_vit(patch, 384, 12, 6)
                : size == "base"  ? timm_vit(patch, 768, 12, 12)
                : size == "large" ? timm_vit(patch, 1024, 24, 16)
                                  : timm_vit(patch, 1280, 32, 16);
  c.img_h = c.img_w = res;
  c.dist_token = c.head_dist = m[3].matched;
  // The name's preprocessing, as timm's pretrained_cfg gives it (the _cfg of
  // vision_transformer.py and deit.py): a center crop of 0.9 at 224 (DeiT's too: 0.875 was the
  // paper's, not timm's) and none above; ImageNet's mean and std for DeiT.
  c.crop_pct = res > 224 ? 1.0 : 0.9;
  if (m[2].matched) {
    c.mean = {0.485f, 0.456f, 0.406f};
    c.std = {0.229f, 0.224f, 0.225f};
  }
  return c;
}

}  // namespace

ViTConfig preset(const std::string& name) {
  if (auto c = timm_named(name)) return *c;
  if (name == "vit-tiny-16") return timm_vit(16, 192, 12, 3);
  if (name == "vit-small-16") return timm_vit(16, 384, 12, 6);
  if (name == "vit-small-32") return timm_vit(32, 384, 12, 6);
  if (name == "vit-base-16") return timm_vit(16, 768, 12, 12);
  if (name == "vit-base-32") return timm_vit(32, 768, 12, 12);
  if (name == "vit-large-16") return timm_vit(16, 1024, 24, 16);
  if (name == "vit-huge-14") return timm_vit(14, 1280, 32, 16);
  if (name == "mnist-seed") {  // seed 001: 7x7 patches of 4x4, hidden 8, 2 blocks, 2 heads
    ViTConfig c;
    c.img_h = c.img_w = 28;
    c.in_chans = 1;
    c.patch_h = c.patch_w = 4;
    c.embed_dim = 8;
    c.depth = 2;
    c.num_heads = 2;
    c.mlp_dim = 32;
    c.pos_embed = "sincos";
    c.num_classes = 10;
    c.mean = {0.1307f};  // MNIST statistics
    c.std = {0.3081f};
    return c;
  }
  if (name ==
      "mnist-small") {  // vitcpp's MNIST model (docs/results.md): seed 001's patches, wider and deeper
    ViTConfig c = preset("mnist-seed");
    c.embed_dim = 64;
    c.depth = 6;
    c.num_heads = 4;
    c.mlp_dim = 128;
    c.pos_embed = "learn";
    return c;
  }
  if (name == "cifar-seed") {  // seed 002: patch 4, 192 dims, 12 layers, 12 heads
    ViTConfig c;
    c.img_h = c.img_w = 32;
    c.patch_h = c.patch_w = 4;
    c.embed_dim = 192;
    c.depth = 12;
    c.num_heads = 12;
    c.mlp_dim = 768;
    c.num_classes = 10;
    c.mean = {0.4914f, 0.4822f, 0.4465f};  // CIFAR-10 statistics
    c.std = {0.2470f, 0.2435f, 0.2616f};
    return c;
  }
  std::string known;
  for (auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  const std::string near = nearest_name(name, preset_names());
  throw Error("unknown model preset '" + name + "'" +
              (near.empty() ? "" : " (did you mean '" + near + "'?)") + " (known: " + known +
              ", and timm's names such as vit_base_patch16_224 or deit_small_distilled_patch16_224)");
}

std::vector<std::string> preset_names() {
  return {"vit-tiny-16",  "vit-small-16", "vit-small-32", "vit-base-16", "vit-base-32",
          "vit-large-16", "vit-huge-14",  "mnist-seed",   "mnist-small", "cifar-seed"};
}

int64_t forward_flops(const ViTConfig& c, bool cls_tail) {
  const int64_t T = c.num_tokens(), D = c.embed_dim, N = c.num_patches(), I = c.attn_dim();
  const int64_t patch = 2 * N * D * c.patch_dim();
  // A block whose rows after qkv are Tq of the T tokens.
  auto block = [&](int64_t Tq) {
    return 2 * T * D * 3 * I              // qkv
           + 2 * 2 * Tq * T * I           // q k^T and P v
           + 2 * Tq * I * D               // proj
           + 2 * 2 * Tq * D * c.mlp_dim;  // fc1, fc2
  };
  const int64_t blocks =
      cls_tail && c.depth > 0 ? (c.depth - 1) * block(T) + block(c.head_tokens()) : c.depth * block(T);
  // The attention pool: kv on every token; q (per image, as timm expands the latent), its
  // scores and P v; proj; the MLP.
  const int64_t pool =
      c.map_pool() ? 2 * T * D * 2 * D + 2 * 2 * T * D + 2 * 2 * D * D + 2 * 2 * D * c.mlp_dim : 0;
  return patch + blocks + pool + 2 * D * c.num_classes * c.head_tokens();
}

}  // namespace vit
