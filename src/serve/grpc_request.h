// The gRPC API's ModelInfer request read into an InferRequest, and its answer written: the
// same checks and meaning as the JSON bodies of protocol.h, on inference.proto's messages;
// and the messages of Triton's model configuration and statistics.
// Apart from grpc_server.cpp so that the fuzz harness reaches it without gRPC itself.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "inference.pb.h"
#include "serve/metrics.h"
#include "serve/protocol.h"

namespace vit::serve {

// The request's one input (pixel_values FP32 or image BYTES), its data in raw_input_contents
// (what tritonclient sends) or in contents; its id, and the classification parameter of an
// output "logits". Throws RequestError: 400 for what is wrong, 413 for images that decode into
// more than max_input_bytes.
InferRequest parse_grpc_infer(const inference::ModelInferRequest& req, const Classifier& model,
                              size_t max_input_bytes);

// The answer for r's logits [n, K]: "logits" FP32 [n, K] or, with classification, BYTES
// [n, k], in raw_output_contents (as Triton answers).
void grpc_infer_response(const std::string& model_name, const InferRequest& r,
                         const std::vector<float>& logits, const Classifier& model,
                         inference::ModelInferResponse& res, const std::string& version = "1");

// Triton's ModelConfig for the model: the facts of GET /v2/models/{m}/config (model_config).
void grpc_model_config(const std::string& model_name, const Classifier& model, const ModelSettings& s,
                       inference::ModelConfig& config);

// Triton's ModelStatistics: the counts of GET /v2/models/stats (Metrics::stats_json).
void grpc_statistics(const std::vector<Metrics::ModelStats>& stats, inference::ModelStatisticsResponse& res);

}  // namespace vit::serve
