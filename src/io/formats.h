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
#include <vector>

#include "vit/io/safetensors.h"
#include "vit/model/config.h"

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
};

// A JSON file beside the weights, if there is one (errors name the file when it is not JSON).
std::optional<nlohmann::json> json_beside(const SafeTensors& st, const std::string& name);
// j[key] if present and not null.
const nlohmann::json* field(const nlohmann::json& j, const char* key);
// An int or [h, w] (timm's img_size, vit-pytorch's image_size, ...) into h and w; false when v
// is null. what: the field, for errors.
bool read_size(const nlohmann::json* v, int64_t& h, int64_t& w, const char* what);

Mapping timm_mapping(const SafeTensors& st, int64_t num_heads);
Mapping hf_mapping(const SafeTensors& st);
// lucidrains/vit-pytorch's ViT (vit_pytorch_format.cpp).
bool is_vit_pytorch(const SafeTensors& st);
Mapping vit_pytorch_mapping(const SafeTensors& st, int64_t num_heads);

// timm's architecture names (vit_base_patch16_224, deit_small_patch16_224, ...): the heads of
// the family if the name is one and its width matches embed_dim, else 0.
int64_t heads_from_architecture(const std::string& arch, int64_t embed_dim);

}  // namespace vit::detail
