// load_pretrained_as: a checkpoint read as a named model, as timm.create_model(name,
// checkpoint_path=...) reads it.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "io/pretrained.h"

namespace vit {

namespace {
// timm builds the name's model and loads the file into it, failing on a tensor of another
// shape, or one missing or unexpected. Here the file builds the model: it must be the name's,
// in the widths and counts that give its tensors their shapes, and in the tokens and norms
// whose tensors timm's strict load would find unexpected or missing (a DeiT-3 file under
// vit_small_patch16_224's name loaded with vit_small's mean and std, silently).
void check_is(const ViTConfig& got, const ViTConfig& want, const std::string& name, const std::string& path,
              const std::string& as_is) {
  const std::string hint = " (give the checkpoint alone, " + as_is + ", to take it as it is)";
  auto describe = [](const ViTConfig& c) {
    return detail::concat("embed_dim ", c.embed_dim, ", depth ", c.depth, ", num_heads ", c.num_heads,
                          ", mlp_dim ", c.mlp_dim, ", patch ", c.patch_h, "x", c.patch_w, ", in_chans ",
                          c.in_chans);
  };
  VIT_CHECK(describe(got) == describe(want), path, " is not a ", name, ": it holds a ViT of ", describe(got),
            "; ", name, " has ", describe(want), hint);
  auto yes = [](bool b) -> std::string { return b ? "yes" : "no"; };
  auto layout = [&](const ViTConfig& c) {
    return std::vector<std::pair<const char*, std::string>>{
        {"class token", yes(c.class_token)},
        {"register tokens", std::to_string(c.reg_tokens)},
        {"distillation token", yes(c.dist_token)},
        {"position embeddings of the prefix tokens", yes(!c.no_embed_class)},
        {"patch bias", yes(c.patch_bias)},
        {"LayerScale", yes(c.layer_scale())},
        {"qkv bias", yes(c.qkv_bias)},
        {"norm_pre", yes(c.pre_norm)},
        {"fc_norm", yes(c.use_fc_norm())},
        {"attention pool", yes(c.map_pool())}};
  };
  std::string differ;
  const auto g = layout(got), w = layout(want);
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].second != w[i].second)
      differ += detail::concat(differ.empty() ? "" : ", ", g[i].first, " ", g[i].second, " (", name, ": ",
                               w[i].second, ")");
  VIT_CHECK(differ.empty(), path, " is not a ", name, ": it has ", differ, hint);
}
}  // namespace

Pretrained load_pretrained_as(const std::string& path, const std::string& name, LoadOptions opt,
                              const std::string& as_is) {
  const ViTConfig want = named_config(name);
  opt.architecture = name;
  opt.num_heads = want.num_heads;
  Pretrained p;
  try {
    p = load_pretrained(path, opt);
  } catch (const Error&) {
    // Read as the name's, another layout fails in the loader's words ("tensors that have no
    // place", "global_pool 'token' needs class_token"); read as it is, the file says what it
    // holds, and check_is how it differs from the name.
    LoadOptions alone = opt;
    alone.architecture.clear();
    alone.config_only = true;  // what it holds, not its weights
    std::optional<ViTConfig> held;
    try {
      held = load_pretrained(path, alone).config;
    } catch (const Error&) {
    }
    if (held) check_is(*held, want, name, path, as_is);
    throw;
  }
  check_is(p.model ? p.model->config() : p.config, want, name, path, as_is);
  return p;
}

}  // namespace vit
