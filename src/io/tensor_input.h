// `vit predict --tensor FILE.safetensors:NAME`: a preprocessed float batch [B, C, H, W] read
// from a safetensors file instead of images (how scripts drive vitcpp). The spec is split at
// its last colon, so the file name may itself hold colons; the name may not.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace vit {

struct TensorSpec {
  std::string file, name;
};

// Errors name the spec: no colon, an empty file or tensor name.
TensorSpec parse_tensor_spec(const std::string& spec);

// The tensor `name` of `st` as float, checked to be [B, C, H, W] for the model's
// [C, H, W] (B >= 1); `rows` receives B. Errors give the shape found and the one wanted.
std::vector<float> read_tensor_input(const SafeTensors& st, const std::string& name, int64_t C, int64_t H,
                                     int64_t W, int64_t* rows);

}  // namespace vit
