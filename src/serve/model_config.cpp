#include "serve/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "core/check.h"
#include "core/threads.h"
#include "inference.pb.h"

namespace vit::serve {

namespace {

namespace pb = inference;

// The text between the first `open` and the next `close` ("" when absent).
std::string between(const std::string& s, const std::string& open, const std::string& close) {
  const size_t a = s.find(open);
  if (a == std::string::npos) return "";
  const size_t b = s.find(close, a + open.size());
  return b == std::string::npos ? "" : s.substr(a + open.size(), b - a - open.size());
}

// Protobuf's parse errors become the exception; its warnings (a field or enum value that
// inference.proto's ModelConfig does not hold) become notes.
class Collector final : public google::protobuf::io::ErrorCollector {
 public:
  explicit Collector(std::vector<std::string>& notes) : notes_(notes) {}
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = detail::concat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  // Protobuf's 'Message type "inference.ModelInput" has no field named "reshape".' becomes
  // "line 4: ModelInput.reshape is not read by vit serve"; the inside of what ModelConfig
  // reads as Unread (model_warmup, ...) has a note of its own.
  void AddWarning(int line, int, const std::string& message) override {
    const std::string type = between(message, "\"inference.", "\""),
                      field = between(message, "named \"", "\"");
    if (type == "Unread") return;
    notes_.push_back(type.empty() || field.empty() ? detail::concat("line ", line + 1, ": ", message)
                                                   : detail::concat("line ", line + 1, ": ", type, ".", field,
                                                                    " is not read by vit serve"));
  }
  std::string error;

 private:
  std::vector<std::string>& notes_;
};

}  // namespace

bool model_configs_supported() {
  return true;
}

ModelSettings apply_model_config(std::string_view text, bool json, const std::string& model_name,
                                 const std::string& where, ModelSettings s, std::vector<std::string>& notes) {
  pb::ModelConfig c;
  if (json) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;  // Triton's other fields
    const auto status = google::protobuf::util::JsonStringToMessage(std::string(text), &c, options);
    VIT_CHECK(status.ok(), where, ": not a model configuration in JSON: ", status.message().as_string());
  } else {
    google::protobuf::TextFormat::Parser parser;
    Collector collector(notes);
    parser.RecordErrorsTo(&collector);
    parser.AllowUnknownField(true);  // Triton's fields that inference.proto leaves out
    VIT_CHECK(parser.ParseFromString(std::string(text), &c), where, ": ",
              collector.error.empty() ? "not a model configuration" : collector.error);
  }
  VIT_CHECK(c.name().empty() || c.name() == model_name, where, ": name \"", c.name(), "\", but the model is ",
            model_name, " (Triton's rule: the folder's name)");
  VIT_CHECK(
      !c.has_sequence_batching() && !c.has_ensemble_scheduling(), where,
      ": sequence batching and ensembles are not served by vit serve (its classifiers have no state, and "
      "preprocess images themselves)");
  VIT_CHECK(c.batch_input_size() + c.batch_output_size() == 0, where,
            ": batch_input and batch_output are not served by vit serve");
  if (c.model_warmup_size() > 0)
    notes.push_back("model_warmup is not read: vit serve warms each instance up itself");
  VIT_CHECK(c.max_batch_size() >= 0, where, ": max_batch_size ", c.max_batch_size(), " is negative");
  s.max_batch = c.max_batch_size() > 0 ? c.max_batch_size() : 1;
  s.dynamic = c.has_dynamic_batching() && s.max_batch > 1;
  if (c.has_dynamic_batching()) {
    const uint64_t us = c.dynamic_batching().max_queue_delay_microseconds();
    VIT_CHECK(us <= 1'000'000'000, where, ": dynamic_batching max_queue_delay_microseconds ", us,
              " is more than 1000 s (--max-delay-ms's limit)");
    s.max_delay_ms = double(us) / 1000;
    // Triton's 0 is no limit; here the queue is bounded, by --max-queue then.
    if (const uint32_t q = c.dynamic_batching().default_queue_policy().max_queue_size(); q > 0)
      s.max_queue = q;
  }
  if (c.instance_group_size() > 0) {
    int64_t count = 0;  // (in int32, two counts of 2^31 - 1 wrapped to -2: no instance at all)
    for (const pb::ModelInstanceGroup& g : c.instance_group()) {
      VIT_CHECK(g.kind() == pb::ModelInstanceGroup::KIND_CPU || g.kind() == pb::ModelInstanceGroup::KIND_AUTO,
                where, ": instance_group kind ", pb::ModelInstanceGroup::Kind_Name(g.kind()),
                ": vit serve runs on the CPU (KIND_CPU)");
      VIT_CHECK(g.count() >= 0, where, ": instance_group count ", g.count(), " is negative");
      count += g.count() > 0 ? g.count() : 1;  // Triton's default count is 1 on the CPU
    }
    VIT_CHECK(count <= kMaxThreads, where, ": instance_group counts add up to ", count,
              " instances; at most ", kMaxThreads, " (each needs a thread of its own)");
    s.instances = int(count);
  }
  for (const auto& [key, value] : c.parameters()) {
    if (key == "dtype") {
      const std::string& d = value.string_value();
      VIT_CHECK(d == "fp32" || d == "bf16" || d == "int8", where,
                ": parameter dtype is fp32, bf16 or int8, not \"", d, "\"");
      s.dtype = d;
    } else {
      notes.push_back("parameter " + key + " is not read by vit serve (it reads dtype)");
    }
  }
  for (const char* field : {"platform", "backend"}) {
    const std::string& v = std::string_view(field) == "platform" ? c.platform() : c.backend();
    if (!v.empty() && v != "vitcpp")
      notes.push_back(std::string(field) + " \"" + v + "\": vit serve runs it as vitcpp");
  }
  if (c.input_size() + c.output_size() > 0)
    notes.push_back("input and output are not read: the checkpoint says them");
  return s;
}

}  // namespace vit::serve
