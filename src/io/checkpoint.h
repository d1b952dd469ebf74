// Model checkpoints: safetensors with timm's tensor names (so timm loads them as they are),
// the config JSON in the header's __metadata__["vit_config"] and in config.json beside.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "io/safetensors.h"
#include "model/vit.h"

namespace vit {

// Writes path (atomically) and config.json in the same directory.
void save_checkpoint(const std::string& path, const ViT& model,
                     const std::map<std::string, std::string>& extra_metadata = {},
                     bool write_config_json = true);
// The config stored with a checkpoint: its metadata, else config.json beside it.
ViTConfig checkpoint_config(const SafeTensors& st);
// Copies every parameter from st into model. Missing tensors, extra tensors and wrong
// shapes are errors naming the tensor and the file; nothing is changed on error.
void load_weights(ViT& model, const SafeTensors& st);
std::unique_ptr<ViT> load_checkpoint(const std::string& path);

}  // namespace vit
