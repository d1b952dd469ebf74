#include "model_flags.h"

#include "vit/core/error.h"

namespace vit::app {

void ModelFlags::add_to(CLI::App& cmd) {
  cmd.add_option(
         "--model", model,
         "model preset: " +
             [] {
               std::string s;
               for (auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
               return s;
             }())
      ->capture_default_str();
  cmd.add_option("--config", config_file, "model config JSON (instead of --model)");
  // Two-value options keep their values together even where others take the last one.
  cmd.add_option("--img-size", img_size, "image size: S or H W")
      ->expected(1, 2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--patch-size", patch_size, "patch size: P or PH PW")
      ->expected(1, 2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--in-chans", in_chans, "input channels");
  cmd.add_option("--embed-dim", embed_dim, "embedding dimension");
  cmd.add_option("--depth", depth, "number of encoder blocks");
  cmd.add_option("--num-heads", num_heads, "attention heads");
  cmd.add_option("--mlp-dim", mlp_dim, "MLP hidden size");
  cmd.add_option("--num-classes", num_classes, "classes of the head");
  cmd.add_option("--pool", pool, "global pool: token or avg")->check(CLI::IsMember({"token", "avg"}));
  cmd.add_option("--pos-embed", pos_embed, "position embedding: learn or sincos")
      ->check(CLI::IsMember({"learn", "sincos"}));
  cmd.add_option("--drop", drop, "dropout rate (projections, MLP and head)");
  cmd.add_option("--drop-path", drop_path, "stochastic depth rate");
  cmd.add_option("--attn-drop", attn_drop, "attention dropout rate");
}

ViTConfig ModelFlags::resolve() const {
  ViTConfig c = config_file.empty() ? preset(model) : ViTConfig::load(config_file);
  auto pair = [](const std::vector<int64_t>& v, int64_t& a, int64_t& b) {
    if (v.empty()) return;
    a = v[0];
    b = v.size() > 1 ? v[1] : v[0];
  };
  pair(img_size, c.img_h, c.img_w);
  pair(patch_size, c.patch_h, c.patch_w);
  if (in_chans > 0 && in_chans != c.in_chans) {
    c.in_chans = in_chans;
    c.mean.assign(in_chans, 0.5f);
    c.std.assign(in_chans, 0.5f);
  }
  if (embed_dim > 0) c.embed_dim = embed_dim;
  if (depth > 0) c.depth = depth;
  if (num_heads > 0) c.num_heads = num_heads;
  if (mlp_dim > 0) c.mlp_dim = mlp_dim;
  if (num_classes > 0) c.num_classes = num_classes;
  if (!pool.empty()) {
    c.global_pool = pool;
  }
  if (!pos_embed.empty()) c.pos_embed = pos_embed;
  if (drop >= 0) c.drop_rate = c.proj_drop_rate = drop;
  if (drop_path >= 0) c.drop_path_rate = drop_path;
  if (attn_drop >= 0) c.attn_drop_rate = attn_drop;
  c.validate();
  return c;
}

void InputFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--interpolation", interpolation, "resize filter")
      ->check(CLI::IsMember({"bilinear", "bicubic"}))
      ->capture_default_str();
  cmd.add_option(
         "--crop-pct", crop_pct,
         "resize the shorter side to size/crop_pct, then center-crop (timm's eval transform; 1 = resize "
         "straight to the input size)")
      ->capture_default_str();
}

InputSpec InputFlags::spec(const ViTConfig& cfg) const {
  VIT_CHECK(crop_pct > 0.f && crop_pct <= 1.f, "--crop-pct must be in (0, 1], got ", crop_pct);
  InputSpec in = input_spec(cfg);
  in.interpolation = interpolation;
  in.crop_pct = crop_pct;
  return in;
}

}  // namespace vit::app
