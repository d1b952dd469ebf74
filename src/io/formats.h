// What a pretrained file means to vitcpp: the config it implies and, for every vitcpp
// parameter, the file's tensors that make it (concatenated along dim 0: Hugging Face's
// query, key and value become one qkv). Each layout (timm_format.cpp, hf_format.cpp) turns
// its file into a Mapping; pretrained.cpp applies one.
#pragma once
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
};

// A JSON file beside the weights, if there is one (errors name the file when it is not JSON).
std::optional<nlohmann::json> json_beside(const SafeTensors& st, const std::string& name);

Mapping timm_mapping(const SafeTensors& st, int64_t num_heads);
Mapping hf_mapping(const SafeTensors& st);

// timm's architecture names (vit_base_patch16_224, deit_small_patch16_224, ...): the heads of
// the family if the name is one and its width matches embed_dim, else 0.
int64_t heads_from_architecture(const std::string& arch, int64_t embed_dim);

}  // namespace vit::detail
