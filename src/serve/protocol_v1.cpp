#include "serve/protocol_v1.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "serve/json_tensor.h"

namespace vit::serve {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) {
  throw RequestError(400, what);
}

// One instance's pixels, nested exactly as dims ([C][H][W]) from depth on, appended to out.
void read_nested(const json& j, const std::vector<int64_t>& dims, size_t depth, const std::string& where,
                 std::vector<float>& out) {
  if (depth == dims.size()) {
    if (!j.is_number()) bad(where + ": holds " + std::string(j.type_name()) + " values; pixels are numbers");
    const double v = j.get<double>();
    if (!fits_fp32(v)) bad(where + ": " + j.dump() + " is beyond FP32's range");
    out.push_back(j.get<float>());  // as the text's fast path reads it (json_tensor.h), bit for bit
    return;
  }
  if (!j.is_array() || int64_t(j.size()) != dims[depth])
    bad(where + ": pixels must be nested [" + std::to_string(dims[0]) + "][" + std::to_string(dims[1]) +
        "][" + std::to_string(dims[2]) + "] (C, H, W: the model's input, preprocessed); at depth " +
        std::to_string(depth) + " found " +
        (j.is_array() ? std::to_string(j.size()) + " items" : j.type_name()));
  for (const json& e : j) read_nested(e, dims, depth + 1, where, out);
}

// An image file in base64 ("b64" or "data"), or null when the instance is not one.
const json* image_of(const json& instance) {
  if (!instance.is_object()) return nullptr;
  for (const char* key : {"b64", "data"})
    if (instance.size() == 1 && instance.contains(key)) return &instance[key];
  return nullptr;
}

}  // namespace

InferRequest parse_v1_predict(std::string_view body, const Classifier& m, size_t max_input_bytes) {
  const int64_t per = m.channels() * m.height() * m.width();
  // Pixels as numbers alone, nested [N][C][H][W] (or [N][H][W] for one channel): read from
  // the text (json_tensor.h), as the Open Inference Protocol's data is. The rest of the body
  // must still be JSON. Anything else is nlohmann's, below, which says what is wrong.
  constexpr int kMostNesting = 32;
  JsonScan scan = scan_json(body, kMostNesting, JsonTarget::v1_instances);
  const std::vector<int64_t> image = {m.channels(), m.height(), m.width()}, plane = {m.height(), m.width()};
  if (scan.found && scan.shape.size() > 1 && scan.shape[0] > 0 &&
      (std::equal(image.begin(), image.end(), scan.shape.begin() + 1, scan.shape.end()) ||
       (m.channels() == 1 &&
        std::equal(plane.begin(), plane.end(), scan.shape.begin() + 1, scan.shape.end())))) {
    std::string rest(body.substr(0, scan.begin));
    rest += "[]";
    rest += body.substr(scan.end);
    if (!json::accept(rest)) bad("the body is not JSON: {\"instances\": [...]}");
    InferRequest r;
    r.n = scan.shape[0];
    image_batch({r.n}, m, max_input_bytes / sizeof(float));  // 413 past --max-body-mb
    r.x = std::move(scan.values);
    return r;
  }
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) bad("the body is not JSON: {\"instances\": [...]}");
  if (!j.is_object()) bad("the body must be a JSON object: {\"instances\": [...]}");
  const char* key = j.contains("instances") ? "instances" : "inputs";
  if (!j.contains(key) || !j[key].is_array() || j[key].empty())
    bad("the body must hold \"instances\": a list of images, each nested [C][H][W] pixels or {\"b64\": "
        "\"...\"}");
  const json& instances = j[key];
  const std::vector<int64_t> dims = {m.channels(), m.height(), m.width()};
  InferRequest r;
  r.n = int64_t(instances.size());
  image_batch({r.n}, m, max_input_bytes / sizeof(float));  // 413 past --max-body-mb
  r.x.resize(size_t(r.n * per));
  std::vector<float> pixels;
  for (int64_t i = 0; i < r.n; ++i) {
    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    const json* inst = &instances[size_t(i)];
    // {"pixel_values": ...} or {"image": ...}: the input named, as a model of several would have it.
    if (inst->is_object() && inst->size() == 1 && (inst->contains("pixel_values") || inst->contains("image")))
      inst = &inst->begin().value();
    if (inst->is_array()) {
      pixels.clear();
      // A one-channel model takes [H][W] too (an MNIST digit as rows of numbers).
      const bool plane = m.channels() == 1 && !inst->empty() && (*inst)[0].is_array() &&
                         !(*inst)[0].empty() && (*inst)[0][0].is_number();
      read_nested(*inst, dims, plane ? 1 : 0, where, pixels);
      std::copy(pixels.begin(), pixels.end(), r.x.begin() + i * per);
      continue;
    }
    const json* file = image_of(*inst);
    if (!file && inst->is_string()) file = inst;  // {"image": "<base64>"}
    if (!file || !file->is_string())
      bad(where + ": an image is nested [C][H][W] pixels, or {\"b64\": \"<base64 of a PNG or JPEG file>\"}");
    const std::string bytes = base64_decode(file->get<std::string>());
    try {
      preprocess_file(m, bytes, r.x.data() + i * per);
    } catch (const Error& e) {
      bad(where + ": " + e.what());
    }
  }
  return r;
}

std::string v1_predict_response(const std::vector<float>& logits, const Classifier& m) {
  const size_t K = size_t(m.num_classes());
  json predictions = json::array();
  for (size_t i = 0; i + K <= logits.size(); i += K)
    predictions.push_back(
        std::vector<float>(logits.begin() + std::ptrdiff_t(i), logits.begin() + std::ptrdiff_t(i + K)));
  return json_for_output(json{{"predictions", std::move(predictions)}});
}

std::string v1_models(const std::vector<std::string>& names) {
  return json_for_output(json{{"models", names}});
}

std::string v1_model_ready(const std::string& name) {
  return json_for_output(json{{"name", name}, {"ready", true}});
}

}  // namespace vit::serve
