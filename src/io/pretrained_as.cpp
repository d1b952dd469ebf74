// load_pretrained_as: a checkpoint read as a named model, as timm.create_model(name,
// checkpoint_path=...) reads it.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "io/formats.h"
#include "io/pretrained.h"

namespace vit {

namespace detail {
std::vector<std::pair<const char*, std::string>> tensor_layout(const ViTConfig& c) {
  auto yes = [](bool b) -> std::string { return b ? "yes" : "no"; };
  return {{"class token", yes(c.class_token)},
          {"register tokens", std::to_string(c.reg_tokens)},
          {"distillation token", yes(c.dist_token)},
          {"position embeddings of the prefix tokens", yes(!c.no_embed_class)},
          {"patch bias", yes(c.patch_bias)},
          {"LayerScale", yes(c.layer_scale())},
          {"qkv bias", yes(c.qkv_bias)},
          {"norm_pre", yes(c.pre_norm)},
          {"fc_norm", yes(c.use_fc_norm())},
          {"attention pool", yes(c.map_pool())}};
}
}  // namespace detail

namespace {
// timm builds the name's model and loads the file into it, failing on a tensor of another
// shape, or one missing or unexpected. Here the file builds the model: it must be the name's,
// in the widths and counts that give its tensors their shapes, and in the tokens and norms
// whose tensors timm's strict load would find unexpected or missing (a DeiT-3 file under
// vit_small_patch16_224's name loaded with vit_small's mean and std, silently). heads_known:
// whether the file says its heads (a bare state dict does not: the name gives them).
void check_is(const ViTConfig& got, bool heads_known, const ViTConfig& want, const std::string& name,
              const std::string& path, const std::string& as_is) {
  const std::string hint = " (give the checkpoint alone, " + as_is + ", to take it as it is)";
  auto describe = [&](const ViTConfig& c) {
    return detail::concat("embed_dim ", c.embed_dim, ", depth ", c.depth,
                          heads_known ? ", num_heads " + std::to_string(c.num_heads) : std::string(),
                          ", mlp_dim ", c.mlp_dim, ", patch ", c.patch_h, "x", c.patch_w, ", in_chans ",
                          c.in_chans);
  };
  VIT_CHECK(describe(got) == describe(want), path, " is not a ", name, ": it holds a ViT of ", describe(got),
            "; ", name, " has ", describe(want), hint);
  std::string differ;
  const auto g = detail::tensor_layout(got), w = detail::tensor_layout(want);
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].second != w[i].second)
      differ += detail::concat(differ.empty() ? "" : ", ", g[i].first, " ", g[i].second, " (", name, ": ",
                               w[i].second, ")");
  VIT_CHECK(differ.empty(), path, " is not a ", name, ": it has ", differ, hint);
}

// What the file holds, read as it is: the header alone (config_only), with its own heads, or
// one head where it does not say them (its shapes are what matters then). Empty when even
// that fails (the load then says why).
std::optional<ViTConfig> held_config(const std::string& path, LoadOptions opt, bool& heads_known) {
  opt.architecture.clear();
  opt.config_only = true;
  for (const int64_t heads : {int64_t(0), int64_t(1)}) {
    opt.num_heads = heads;
    try {
      const ViTConfig c = load_pretrained(path, opt).config;
      heads_known = heads == 0;
      return c;
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}
}  // namespace

Pretrained load_pretrained_as(const std::string& path, const std::string& name, LoadOptions opt,
                              const std::string& as_is) {
  const ViTConfig want = named_config(name);
  // First what the file holds: another model is refused before its weights are read, in
  // words that say how it differs (read as the name's, it failed in the loader's: "num_heads
  // 12 does not divide embed_dim 512", "tensors that have no place").
  bool heads_known = true;
  const std::optional<ViTConfig> held = held_config(path, opt, heads_known);
  if (held) check_is(*held, heads_known, want, name, path, as_is);
  opt.architecture = name;
  opt.num_heads = want.num_heads;
  Pretrained p = load_pretrained(path, opt);
  const ViTConfig& got = p.model ? p.model->config() : p.config;
  if (!held) check_is(got, true, want, name, path, as_is);  // (the header alone did not read)
  // A config beside the file (config.json, a Hugging Face config) decides what the tensors
  // cannot say; where that is not the name's, say so (timm's validate.py builds the name's).
  std::string differ;
  auto add = [&](const char* what, const std::string& file, const std::string& named) {
    if (file == named) return;
    if (!differ.empty()) differ.append(", ");
    differ.append(detail::concat(what, " ", file, " (", name, ": ", named, ")"));
  };
  auto list = [](const std::vector<float>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s.append(detail::concat(i ? " " : "", v[i]));
    return s;
  };
  add("activation", got.act_layer, want.act_layer);
  add("LayerNorm eps", detail::concat(got.norm_eps), detail::concat(want.norm_eps));
  add("mean", list(got.mean), list(want.mean));
  add("std", list(got.std), list(want.std));
  add("interpolation", got.interpolation, want.interpolation);
  add("crop_pct", detail::concat(got.crop_pct), detail::concat(want.crop_pct));
  if (!differ.empty())
    p.notes.push_back("its config gives " + differ +
                      "; the file's config decides them (give the .safetensors "
                      "file alone, in a folder without config.json, to take the name's)");
  return p;
}

}  // namespace vit
