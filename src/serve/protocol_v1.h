// KServe's V1 protocol (TensorFlow Serving's REST API, which KServe's V1 data plane speaks):
// POST /v1/models/{m}:predict with {"instances": [...]} answered {"predictions": [...]},
// GET /v1/models and GET /v1/models/{m}. Errors are RequestError, as in protocol.h.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "serve/protocol.h"

namespace vit::serve {

// The request's instances (or "inputs", KServe's other name for them), one image each:
// - a nested list [C][H][W] of numbers (or [H][W] for a one-channel model): pixel_values,
//   already preprocessed;
// - {"b64": "..."} (TensorFlow Serving's binary value) or {"data": "..."} (TorchServe's KServe
//   wrapper): a PNG or JPEG file in base64, preprocessed as vit predict does;
// - an object naming the input: {"pixel_values": [C][H][W]} or {"image": {"b64": "..."}}.
// Images decoded into more than max_input_bytes of input are refused with 413.
InferRequest parse_v1_predict(std::string_view body, const Classifier& model, size_t max_input_bytes);

// {"predictions": [[K logits], ...]}: each instance's logits, as TensorFlow Serving answers a
// model's one output.
std::string v1_predict_response(const std::vector<float>& logits, const Classifier& model);

// GET /v1/models: {"models": [names]}; GET /v1/models/{m}: {"name": m, "ready": true}.
std::string v1_models(const std::vector<std::string>& names);
std::string v1_model_ready(const std::string& name);

}  // namespace vit::serve
