// How vit serve runs one model: its batching, queue, instances and dtype. The flags give
// every model's defaults; Triton's model configuration can set them per model, as a
// config.pbtxt file in the model's folder (protobuf text) or as a load request's "config"
// parameter (JSON), each read as Triton's ModelConfig message (inference.proto):
//   max_batch_size: 8                              (--max-batch; 0: one image per pass)
//   dynamic_batching { max_queue_delay_microseconds: 2000
//                      default_queue_policy { max_queue_size: 64 } }   (--max-delay-ms, --max-queue)
//   instance_group [ { count: 2 kind: KIND_CPU } ]                     (--instances)
//   parameters { key: "dtype" value { string_value: "bf16" } }         (--dtype)
// Without dynamic_batching, requests are not combined (Triton's default scheduler). Fields
// vit serve does not read (input, output, backend, ...) are allowed and said in the log.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vit::serve {

struct ModelSettings {
  int64_t max_batch = 16;  // the most images in a pass (Triton's max_batch_size)
  bool dynamic = true;     // requests are combined into passes, waiting up to max_delay_ms
  double max_delay_ms = 5;
  int64_t max_queue = 256;
  int instances = 1;
  std::string dtype;  // "": the checkpoint's
  int64_t max_delay_us() const { return int64_t(max_delay_ms * 1000); }
  // The most requests in the server at once: the queue and a pass on each instance.
  int64_t capacity() const { return max_queue + (dynamic ? max_batch : 1) * instances; }
};

// Whether this build reads model configurations (it needs protobuf).
bool model_configs_supported();

// `defaults` with what the configuration `text` sets (JSON when json, protobuf text
// otherwise; `where` names it in messages). Throws vit::Error for a configuration that does
// not parse, names another model, or asks for what vit serve cannot do (a GPU, a bad value).
// notes: each field read but not used, for the log.
ModelSettings apply_model_config(std::string_view text, bool json, const std::string& model_name,
                                 const std::string& where, ModelSettings defaults,
                                 std::vector<std::string>& notes);

}  // namespace vit::serve
