// The Open Inference Protocol's (KServe v2) JSON bodies for a served classifier, and
// TorchServe's top-5 answer. Parsing errors are RequestError with the HTTP status to answer
// (400) and a message that says what was wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "serve/model_config.h"
#include "vit/classifier.h"

namespace vit::serve {

struct RequestError : Error {
  RequestError(int status, const std::string& what) : Error(what), status(status) {}
  int status;
};

// The server's extensions, as GET /v2 and gRPC's ServerMetadata list them: one list for the
// server, as Triton's (gRPC listed classification alone, and clients that ask before they
// use an extension turned the others off).
inline const std::vector<std::string>& server_extensions() {
  static const std::vector<std::string> kList = {"classification", "binary_tensor_data",
                                                 "model_configuration", "statistics", "model_repository"};
  return kList;
}

// POST /v2/models/{m}/infer's request: one input, either "pixel_values" FP32 [N, C, H, W]
// (already preprocessed; data flat or nested, row-major) or "image" BYTES [N] (base64 of PNG
// or JPEG files, preprocessed as vit predict does); outputs: none or "logits", with
// Triton's classification parameter asking for top-k strings.
//
// The binary tensor data extension (Triton's and KServe's): with json_length > 0 (the
// Inference-Header-Content-Length header) the JSON is the body's first json_length bytes, and
// an input with "parameters": {"binary_data_size": S} takes the next S bytes after it:
// little-endian FP32 values, or for BYTES each element's length (4 bytes, little-endian) and
// then its bytes (a PNG or JPEG file as it is, no base64). An output with "binary_data": true,
// or every output with the request's "binary_data_output": true, is answered the same way.
struct InferRequest {
  std::string id;
  std::vector<float> x;  // [n, C, H, W]
  int64_t n = 0;
  int64_t classification = 0;  // > 0: answer "value:index:label" strings of the top k
  bool binary_output = false;  // the logits (or the strings) as binary data after the JSON
  // Triton's "timeout" request parameter, in microseconds: the request's own deadline, when
  // sooner than --timeout-s (0: none).
  int64_t timeout_us = 0;
};
//
// Images decoded into more than max_input_bytes of input (the server's --max-body-mb) are
// refused with 413: a body of small image files could otherwise ask for any memory.
InferRequest parse_infer(std::string_view body, const Classifier& model, size_t json_length = 0,
                         size_t max_input_bytes = SIZE_MAX);
// The answer's body; with binary output, json_length is the length of its JSON part (the
// Inference-Header-Content-Length header), 0 otherwise.
struct InferResponse {
  std::string body;
  size_t json_length = 0;
};
// The response: "logits" FP32 [n, K], or BYTES [n, k] for classification.
InferResponse infer_response(const std::string& model_name, const InferRequest& r,
                             const std::vector<float>& logits, const Classifier& model,
                             const std::string& version = "1");
// GET /v2/models/{m}: name, versions, platform, inputs and outputs with datatypes and shapes.
std::string model_metadata(const std::string& model_name, const Classifier& model,
                           const std::string& version = "1");
// GET /v2/models/{m}/config (Triton's model configuration extension): the model as Triton's
// ModelConfig message (model_config.proto) in JSON, as tritonclient's get_model_config and
// perf_analyzer read it: max_batch_size, the inputs and output without the batch dimension
// (the two inputs optional: a request gives one), dynamic batching, the queue's size and
// the instance count.
// s: how the server runs it, its dtype the one the model runs in (Host::serving_info).
std::string model_config(const std::string& model_name, const Classifier& model, const ModelSettings& s);
// Triton's model repository extension: a load or unload request's parameter `key` (bool_value,
// string_value: whether it is a boolean, a string). Taken: a load's config (Triton's model
// configuration in JSON, a string; model_config.h) and an unload's unload_dependents (vit
// serve has no ensembles, so it changes nothing). Triton's file: overrides, or anything
// else, are 400.
void repository_parameter(const std::string& key, bool bool_value, bool string_value, bool load);
// POST /v2/repository/models/{m}/load or unload's body: empty, or {"parameters": {...}}.
// Returns the load's config ("" when none).
std::string repository_parameters(std::string_view body, bool load);
// TorchServe's answer: {"label": probability, ...} of the top 5, best first (the index as
// text where the model has no class names).
std::string top5_json(const float* logits, const Classifier& model);
// {"error": "..."}
std::string error_json(const std::string& message);
// The pieces that the JSON and the gRPC requests share (grpc_server.cpp reads the latter).
// Each throws RequestError with the status to answer.
//
// "[1, 3, 224, 224]"
std::string shape_text(const std::vector<int64_t>& shape);
// pixel_values' shape checked against the model's input [N, C, H, W]: N (400 otherwise).
int64_t pixel_batch(const std::vector<int64_t>& shape, const Classifier& model);
// image's shape [N] or [N, 1]: N (400 otherwise; 413 when N images would decode into more
// than max_floats floats).
int64_t image_batch(const std::vector<int64_t>& shape, const Classifier& model, size_t max_floats);
// BYTES elements as binary data: each a 4-byte little-endian length, then its bytes; n of them
// and nothing after (400 otherwise).
std::vector<std::string_view> bytes_elements(std::string_view data, int64_t n);
// The inverse: elements as binary data.
std::string bytes_binary(const std::vector<std::string>& elements);
// An image file (PNG or JPEG) preprocessed as vit predict does, into out [C, H, W]; throws
// vit::Error as Classifier::preprocess. A file is decoded whole before it is resized (up to
// VIT_MAX_IMAGE_PIXELS: 540 MB of RGB from a 519-byte JPEG that claims 13000 x 13000), so
// files are decoded at most as many at a time as the machine has cores, whatever the HTTP
// threads (256): such requests then cost cores x that at most, not connections x that.
void preprocess_file(const Classifier& model, std::string_view file, float* out);
// Each image file (PNG or JPEG) preprocessed as vit predict does, into x [n, C, H, W]
// (400 naming the image that does not decode).
void preprocess_images(const std::vector<std::string_view>& files, const Classifier& model,
                       std::vector<float>& x);
// Triton's classification extension: for each of the n rows of logits [n, K], its top k as
// "value:index:label" strings ("value:index" without class names), best first.
std::vector<std::string> classification(const float* logits, int64_t n, int64_t k, const Classifier& model);
// RFC 4648 base64 (padding optional; line breaks and spaces skipped, as MIME writes them);
// throws RequestError(400) on bad input.
std::string base64_decode(std::string_view text);

}  // namespace vit::serve
