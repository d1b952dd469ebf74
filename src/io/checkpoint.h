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

// ---- checkpoint_int8.cpp: vit quantize's checkpoints. The blocks' four products (qkv, proj,
// fc1, fc2) are stored in int8, NAME as I8 [N, K] and NAME_scale as F32 [N] (w ~ scale[n] q),
// symmetric per output channel as --dtype int8 quantizes them; everything else in F32, and
// "quantization" in the metadata. About 4x smaller for the blocks. Every command loads them
// (dequantized to fp32, q * scale); --dtype int8 then quantizes them to the same int8 values
// and scales again (backends/cpu/int8.h), so they run as they were stored.
bool int8_stored(const std::string& param_name);
void save_int8_checkpoint(const std::string& path, const ViT& model,
                          const std::map<std::string, std::string>& extra_metadata = {});
// Whether st is such a file (its metadata says so).
bool is_int8_checkpoint(const SafeTensors& st);
// st.copy_float(name), or for an I8 tensor with NAME_scale beside it, q * scale (per row).
void copy_weights(const SafeTensors& st, const std::string& name, float* dst);

}  // namespace vit
