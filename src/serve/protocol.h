// The Open Inference Protocol's (KServe v2) JSON bodies for a served classifier, and
// TorchServe's top-5 answer. Parsing errors are RequestError with the HTTP status to answer
// (400) and a message that says what was wrong.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vit/classifier.h"
#include "vit/core/error.h"

namespace vit::serve {

struct RequestError : Error {
  RequestError(int status, const std::string& what) : Error(what), status(status) {}
  int status;
};

// POST /v2/models/{m}/infer's request: one input, either "pixel_values" FP32 [N, C, H, W]
// (already preprocessed; data flat or nested, row-major) or "image" BYTES [N] (base64 of PNG
// or JPEG files, preprocessed as vit predict does); outputs: none or "logits", with
// Triton's classification parameter asking for top-k strings.
struct InferRequest {
  std::string id;
  std::vector<float> x;  // [n, C, H, W]
  int64_t n = 0;
  int64_t classification = 0;  // > 0: answer "value:index:label" strings of the top k
};
InferRequest parse_infer(std::string_view body, const Classifier& model);
// The response: "logits" FP32 [n, K], or BYTES [n, k] for classification.
std::string infer_response(const std::string& model_name, const InferRequest& r,
                           const std::vector<float>& logits, const Classifier& model);
// GET /v2/models/{m}: name, versions, platform, inputs and outputs with datatypes and shapes.
std::string model_metadata(const std::string& model_name, const Classifier& model);
// TorchServe's answer: {"label": probability, ...} of the top 5, best first (the index as
// text where the model has no class names).
std::string top5_json(const float* logits, const Classifier& model);
// {"error": "..."}
std::string error_json(const std::string& message);
// RFC 4648 base64 (padding optional, no whitespace); throws RequestError(400) on bad input.
std::string base64_decode(std::string_view text);

}  // namespace vit::serve
