// ONNX export: a model as one ONNX file (opset 17, ONNX's own LayerNormalization) that ONNX
// Runtime and other ONNX consumers run. Input `pixel_values` float32 [N, C, H, W] (N is a
// dynamic batch; images normalized as the model's preprocessing says), output `logits`
// float32 [N, K] (for a model without a head, num_classes 0: `features` float32 [N, D],
// the pooled pre-logits of ViT::infer_features). Built with ONNX's C++ library
// (libonnx-dev): the file is checked with onnx::checker and ONNX's shape inference before
// it is written.
//
// The library is its own target (vitonnx), so programs that only run models need neither
// ONNX nor protobuf; a build with VIT_ONNX=OFF has a vitonnx that says so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/vit.h"

namespace vit {

struct OnnxExportInfo {
  int64_t nodes = 0, initializers = 0;
  int64_t opset = 0;
  size_t bytes = 0;       // the model file's size
  std::string data_file;  // the weights' file (ONNX external data), if they are not inside
};

// Whether this build can write ONNX (false when configured with -DVIT_ONNX=OFF).
bool onnx_export_available();

// Writes the model to `path` (a temporary name, then renamed). class_names, when given,
// go into the file's metadata (metadata_props "class_names", a JSON list) with the
// preprocessing ("mean", "std", "input_size", ...). Weights of external_from bytes or more as
// written (-1: over 1.5 GiB, as protobuf cannot hold 2 GiB) go to `path`.data beside the model, as
// ONNX's external data, which ONNX Runtime reads from the model's directory. Throws
// vit::Error for a model that cannot be exported: weights packed or released for inference.
// int8: the blocks' four products quantized as ONNX Runtime's quantize_dynamic writes them
// (DynamicQuantizeLinear, MatMulInteger on int8 weights per output channel: export_onnx.cpp).
OnnxExportInfo export_onnx(const ViT& model, const std::string& path,
                           const std::vector<std::string>& class_names = {}, int64_t external_from = -1,
                           bool int8 = false);

// Runs ONNX's checker (onnx::checker::check_model, with the file's path so it reads it
// back) and returns the graph's input and output shapes as text, e.g.
// "pixel_values float [batch,3,224,224] -> logits float [batch,1000]". Throws vit::Error
// with the checker's message when the file is not a valid model.
std::string check_onnx_file(const std::string& path);

}  // namespace vit
