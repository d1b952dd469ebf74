// What a pretrained file means to vitcpp: the config it implies and, for every vitcpp
// parameter, the file's tensors that make it (concatenated along dim 0: Hugging Face's
// query, key and value become one qkv). Each layout (timm_format.cpp, hf_format.cpp) turns
// its file into a Mapping; pretrained.cpp applies one.
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace vit::detail {

struct Mapping {
  ViTConfig cfg;
  std::map<std::string, std::vector<std::string>> sources;  // vitcpp name -> file tensors
  std::set<std::string> skipped;                            // file tensors left out on purpose
  std::vector<std::string> notes;
  std::vector<std::string> class_names;
  // Parameters the layout writes itself (reordered, or made up where the file has nothing):
  // called with the parameter's memory instead of copying `sources`, which still count as used.
  std::map<std::string, std::function<void(float*)>> fills;
  // How --img-size resamples pos_embed by default: "timm" (resample_pos_embed), "timm-bilinear"
  // for flexivit_* (as timm's loader), or for transformers' checkpoints "hf" / "hf-scale"
  // (resample_pos_embed_hf, by the release).
  std::string pos_resample = "timm";
  std::string stored_dtype = "fp32";  // "int8": vit quantize's file
};

// Runs f; a vit::Error or a JSON error it throws is thrown again with `where` (the file) first,
// and `json_source` before a JSON error's message ("config.json: ").
template <typename F>
void naming_file(const std::string& where, F&& f, const std::string& json_source = "") {
  try {
    f();
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": " + json_source + e.what());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

// A JSON file beside the weights, if there is one (errors name the file when it is not JSON).
std::optional<nlohmann::json> json_beside(const SafeTensors& st, const std::string& name);
// Floats as the decimals they were written as (core/decimal.h), for the config files vitcpp
// writes: 1e-06, not 9.999999974752427e-07 (float's nearest, printed as a double).
nlohmann::json tidy(float f);
nlohmann::json tidy(const std::vector<float>& v);
// j[key] if present and not null.
const nlohmann::json* field(const nlohmann::json& j, const char* key);
// An int or [h, w] (timm's img_size, vit-pytorch's image_size, ...) into h and w; false when v
// is null. what: the field, for errors.
bool read_size(const nlohmann::json* v, int64_t& h, int64_t& w, const char* what);

// architecture: timm's name for a file whose config.json does not give one (or that has none):
// what the name implies (heads, activation, LayerNorm eps) then applies as a config's would.
Mapping timm_mapping(const SafeTensors& st, int64_t num_heads, const std::string& architecture = "");
Mapping hf_mapping(const SafeTensors& st);
// transformers' SigLIP vision tower (hf_siglip_format.cpp; hf_mapping hands such files on).
Mapping hf_siglip_mapping(const SafeTensors& st);
// Shared by the Hugging Face layouts: preprocessor_config.json beside the weights
// (ViTImageProcessor's, DeiTImageProcessor's, SiglipImageProcessor's fields), the fields it
// leaves out (or all, without it, with a note) from the processor it names, else `processor`
// (one of those three); hidden_act as vitcpp's act_layer; config.json's id2label as class
// names (empty without it).
void hf_preprocessing(const SafeTensors& st, ViTConfig& c, Mapping& m, const std::string& processor);
// The blocks' tensors of a Hugging Face layout: block i's under layers + "i.", each name below
// followed by weight or bias; q, k and v stack into qkv.
struct HfBlockNames {
  std::string norm1, q, k, v, proj, norm2, fc1, fc2;
};
void hf_block_sources(Mapping& m, int64_t depth, const std::string& layers, const HfBlockNames& n);
// config.json's (or SigLIP's vision_config's) sizes: hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, layer_norm_eps (else eps), image_size, patch_size
// (square), num_channels, with transformers' ViT defaults.
void hf_read_sizes(const nlohmann::json& j, ViTConfig& c, float eps);
std::string hf_activation(const std::string& act);
// The interpolate_pos_encoding of the transformers release config.json names
// (transformers_version): "hf-scale" before 4.45.0 (scale_factor with a +0.1 offset), "hf"
// from 4.45.0 on (an explicit size), or for a file that does not say.
std::string hf_pos_resample(const nlohmann::json& j);
std::vector<std::string> hf_class_names(const nlohmann::json& j, int64_t num_classes);
// lucidrains/vit-pytorch's ViT (vit_pytorch_format.cpp).
bool is_vit_pytorch(const SafeTensors& st);
Mapping vit_pytorch_mapping(const SafeTensors& st, int64_t num_heads);

// timm's architecture names (vit_base_patch16_224, deit_small_patch16_224, ...): the heads of
// the family if the name is one and its width matches embed_dim, else 0. For names newer than
// the table below.
int64_t heads_from_architecture(const std::string& arch, int64_t embed_dim);

// One architecture timm registers (timm_architectures.cpp, generated by tools/timm_table.py).
struct TimmArchitecture {
  const char* name;
  int64_t embed_dim, num_heads;
  float norm_eps;           // its LayerNorms' eps: 1e-6, or 1e-5 for CLIP's
  const char* act;          // the MLP's activation: gelu, gelu_tanh (SigLIP), quick_gelu (CLIP)
  const char* unsupported;  // what vitcpp cannot run, after "timm's NAME"; "" when it runs
  // The model timm.create_model(name) builds, as vitcpp's config JSON (ViTConfig's keys, with
  // its default pretrained_cfg's preprocessing and class count); "" when vitcpp cannot run it.
  const char* config;
};
// timm's current "name.tag" for one of its deprecated names (vit_base_patch16_224_in21k:
// vit_base_patch16_224.augreg_in21k), else name. The lookups below take both.
std::string_view current_timm_name(std::string_view name);
std::map<std::string, std::string> deprecated_timm_names();  // the whole table
// The architecture of a name with or without its pretrained tag (".augreg_in21k"); nullptr
// for names the table does not have.
const TimmArchitecture* find_timm_architecture(std::string_view name);
// The config of a runnable architecture's name, as timm builds it: with a pretrained tag
// (".dino"), the tag's class count, input size and preprocessing (timm_tags.inc); a tag the
// architecture does not have throws, as timm does. Empty for names the table does not have or
// vitcpp cannot run.
std::optional<ViTConfig> timm_architecture_config(std::string_view name);
// The names of those vitcpp runs as timm does (unsupported empty), in the table's order.
std::vector<std::string> runnable_timm_architectures();
// The parts of a model that decide which tensors it has beyond their widths (tokens, biases,
// LayerScale, norms, pooling), each {what, value}: two models of one width load each
// other's state dict strictly when these and the widths agree.
std::vector<std::pair<const char*, std::string>> tensor_layout(const ViTConfig& c);
// The runnable names whose models have c's tensors (widths, depth, patch, channels and
// tensor_layout), those of c's input size first, up to `most`: those a bare state dict may be
// (the hint of an error).
std::vector<std::string> timm_architectures_like(const ViTConfig& c, size_t most);
// Those names with each of their pretrained tags (timm.list_models(include_tags=True)):
// "vit_small_patch16_224.dino", "NAME.untrained" for an architecture without weights.
std::vector<std::string> timm_tagged_names();
// A registered name that builds a model with this width and LayerNorm eps from model_args
// (vit_base_patch16_224 when no width matches); distilled: one of DeiT's distilled names
// (VisionTransformerDistilled; deit_base_distilled_patch16_224 when no width matches).
const char* timm_architecture_for(int64_t embed_dim, float norm_eps, bool distilled = false);

}  // namespace vit::detail
