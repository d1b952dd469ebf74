// vit quantize's checkpoints (checkpoint.h): the blocks' four products in int8 per output
// channel, the rest as save_checkpoint writes it.
#include <algorithm>
#include <cmath>
#include <regex>

#include "core/check.h"
#include "io/checkpoint.h"
#include "ops/ops.h"
#include "vit/core/version.h"

namespace vit {

namespace {
constexpr const char* kQuantization =
    "int8: the blocks' qkv, proj, fc1 and fc2 weights, symmetric per output channel (NAME I8, NAME_scale "
    "F32)";
}

bool int8_stored(const std::string& name) {
  static const std::regex products(R"(blocks\.\d+\.(attn\.qkv|attn\.proj|mlp\.fc1|mlp\.fc2)\.weight)");
  return std::regex_match(name, products);
}

void save_int8_checkpoint(const std::string& path, const ViT& model,
                          const std::map<std::string, std::string>& extra_metadata) {
  const float* params = model.fp32_params(path + ": not saved");
  std::vector<TensorOut> out;
  std::vector<std::vector<int8_t>> q;  // each product's values, kept until written
  std::vector<std::vector<float>> scales;
  for (const auto& s : model.table().specs()) {
    if (!int8_stored(s.name)) {
      out.push_back({s.name, s.shape, DType::F32, params + s.offset});
      continue;
    }
    const int64_t N = s.shape[0], K = s.shape[1];
    q.emplace_back(size_t(N * K));
    scales.emplace_back(size_t(N));
    try {
      ops::quantize_int8_weights(q.back().data(), scales.back().data(), params + s.offset, N, K);
    } catch (const Error& e) {
      throw Error(path + ": not saved: " + s.name + ": " + e.what());
    }
    out.push_back({s.name, s.shape, DType::I8, q.back().data()});
    out.push_back({s.name + "_scale", {N}, DType::F32, scales.back().data()});
  }
  auto meta = extra_metadata;
  meta["format"] = "pt";
  meta["vit_config"] = model.config().to_json(-1);
  meta["vitcpp_version"] = version();
  meta["quantization"] = kQuantization;
  write_safetensors(path, out, meta);
}

// vit quantize's metadata, or a product stored in int8 (a file whose metadata was rewritten).
bool is_int8_checkpoint(const SafeTensors& st) {
  if (st.metadata().count("quantization") > 0) return true;
  for (const auto& t : st.tensors())
    if (t.dtype == DType::I8 && int8_stored(t.name)) return true;
  return false;
}

void copy_weights(const SafeTensors& st, const std::string& name, float* dst) {
  const TensorInfo& t = st.at(name);
  if (t.dtype != DType::I8) return st.copy_float(name, dst);
  VIT_CHECK(
      t.shape.size() == 2, st.path(), ": int8 tensor '", name, "' ", shape_str(t.shape),
      ": int8 is for 2-D weights [out, in] only (vit quantize stores the blocks' qkv, proj, fc1 and fc2)");
  const TensorInfo* s = st.find(name + "_scale");
  VIT_CHECK(s && s->shape == Shape{t.shape[0]}, st.path(), ": int8 tensor '", name, "' ", shape_str(t.shape),
            " needs '", name, "_scale' of shape [", t.shape[0], "] beside it");
  const std::span<const int8_t> q = st.view_i8(name);
  // Symmetric: a row's largest |q| is 127. PyTorch's qint8 reaches -128, whose row would be
  // quantized again to another scale here, not run as stored.
  if (const auto low = std::find(q.begin(), q.end(), int8_t(-128)); low != q.end())
    throw Error(detail::concat(st.path(), ": int8 tensor '", name, "' holds -128 (row ",
                               (low - q.begin()) / t.shape[1],
                               "): vitcpp's int8 weights are symmetric, in [-127, 127]; quantize the fp32 "
                               "weights with vit quantize"));
  const std::vector<float> scale = st.to_float(name + "_scale");
  for (size_t n = 0; n < scale.size(); ++n)
    VIT_CHECK(std::isfinite(scale[n]) && scale[n] >= 0, st.path(), ": '", name, "_scale' of row ", n, " is ",
              scale[n], ": not a scale (a corrupt file?)");
  const size_t K = size_t(t.shape[1]);
  for (size_t n = 0; n < scale.size(); ++n)
    for (size_t k = 0; k < K; ++k) dst[n * K + k] = float(q[n * K + k]) * scale[n];
}

}  // namespace vit
