// timm's registered ViT architectures, from a survey of timm itself (tools/timm_table.py):
// what an architecture's name alone says about a hub checkpoint, whose config.json rarely
// lists the arguments. Some of it leaves no trace in the tensors: QuickGELU and the tanh GELU
// (CLIP, SigLIP), LayerNorm eps 1e-5 (CLIP).
#include <nlohmann/json.hpp>
#include <regex>

#include "core/check.h"
#include "formats.h"

namespace vit::detail {

namespace {

constexpr TimmArchitecture kArchitectures[] = {
#include "timm_architectures.inc"
};

// A pretrained tag of a runnable architecture: what timm.create_model("name.tag") takes from
// the tag's pretrained_cfg where it differs from the name's row (config JSON keys): `.dino`
// has no head and ImageNet's mean, `deit3_*.fb_in22k_ft_in1k` crop 1.0, `*.augreg_in21k`
// 21843 classes.
struct TimmTag {
  const char* arch;
  const char* tag;
  const char* overrides;
};

constexpr TimmTag kTags[] = {
#include "timm_tags.inc"
};

// timm's deprecated names (timm 0.6's vit_base_patch16_224_in21k, as tutorials still write
// them) and the current name.tag timm.create_model builds for each, with a warning.
struct TimmRename {
  const char* deprecated;
  const char* current;
};

constexpr TimmRename kDeprecated[] = {
#include "timm_deprecated.inc"
};

}  // namespace

std::string_view current_timm_name(std::string_view name) {
  for (const auto& r : kDeprecated)
    if (name == r.deprecated) return r.current;
  return name;
}

std::map<std::string, std::string> deprecated_timm_names() {
  std::map<std::string, std::string> out;
  for (const auto& r : kDeprecated) out.emplace(r.deprecated, r.current);
  return out;
}

const TimmArchitecture* find_timm_architecture(std::string_view name) {
  name = current_timm_name(name);
  name = name.substr(0, name.find('.'));  // the pretrained tag: vit_base_patch16_224.augreg_in21k
  for (const auto& a : kArchitectures)
    if (name == a.name) return &a;
  return nullptr;
}

std::optional<ViTConfig> timm_architecture_config(std::string_view name) {
  name = current_timm_name(name);
  const TimmArchitecture* a = find_timm_architecture(name);
  if (!a || *a->unsupported || !*a->config) return std::nullopt;
  const size_t dot = name.find('.');
  // timm's split_model_name_tag: no tag, or an empty one ("NAME."), is the default.
  if (dot == std::string_view::npos || dot + 1 == name.size()) return ViTConfig::from_json(a->config);
  // A tag the architecture does not have is refused, as timm's get_pretrained_cfg refuses it.
  const std::string_view tag = name.substr(dot + 1), arch = a->name;
  std::string tags;
  for (const auto& t : kTags) {
    if (arch != t.arch) continue;
    if (tag == t.tag) {
      nlohmann::json c = nlohmann::json::parse(a->config);
      c.update(nlohmann::json::parse(t.overrides));
      return ViTConfig::from_json(c.dump());
    }
    tags += (tags.empty() ? "" : ", ") + std::string(t.tag);
  }
  throw Error(concat("Invalid pretrained tag (", tag, ") for ", arch, ": its tags are ", tags));
}

std::vector<std::string> runnable_timm_architectures() {
  std::vector<std::string> out;
  for (const auto& a : kArchitectures)
    if (!*a.unsupported) out.push_back(a.name);
  return out;
}

std::vector<std::string> timm_architectures_like(const ViTConfig& c, size_t most) {
  std::vector<std::string> sized, other;  // of c's input size, of another
  const auto layout = tensor_layout(c);
  for (const auto& a : kArchitectures) {
    if (*a.unsupported || a.embed_dim != c.embed_dim) continue;
    const std::optional<ViTConfig> t = timm_architecture_config(a.name);
    if (t && t->depth == c.depth && t->mlp_dim == c.mlp_dim && t->patch_h == c.patch_h &&
        t->patch_w == c.patch_w && t->in_chans == c.in_chans && tensor_layout(*t) == layout)
      (t->img_h == c.img_h && t->img_w == c.img_w ? sized : other).push_back(a.name);
  }
  sized.insert(sized.end(), other.begin(), other.end());
  if (sized.size() > most) sized.resize(most);
  return sized;
}

std::vector<std::string> timm_tagged_names() {
  std::vector<std::string> out;
  for (const auto& t : kTags) out.push_back(std::string(t.arch) + "." + t.tag);
  return out;
}

const char* timm_architecture_for(int64_t embed_dim, float norm_eps, bool distilled) {
  // Plain names (vit_base_patch16_224, vit_base_patch16_clip_224; deit_base_distilled_patch16_224):
  // the nearest reads best, and model_args give every dimension, so any runnable name of the
  // same class with the same eps builds the model.
  static const std::regex plain(R"(^vit_[a-z]+_patch\d+_(clip_)?\d+$)");
  static const std::regex deit(R"(^deit_[a-z]+_distilled_patch\d+_\d+$)");
  const char* fallback = nullptr;
  for (const auto& a : kArchitectures) {
    if (*a.unsupported || a.norm_eps != norm_eps || !std::regex_match(a.name, distilled ? deit : plain))
      continue;
    const std::string_view name(a.name);
    const bool p16_224 = name.ends_with("_patch16_224") || name.ends_with("_patch16_clip_224");
    if (a.embed_dim == embed_dim && p16_224) return a.name;
    if (a.embed_dim == embed_dim && !fallback) fallback = a.name;
  }
  if (fallback) return fallback;
  if (distilled) return "deit_base_distilled_patch16_224";
  return norm_eps == 1e-5f ? "vit_base_patch16_clip_224" : "vit_base_patch16_224";
}

}  // namespace vit::detail
