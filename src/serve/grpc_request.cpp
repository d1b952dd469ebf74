#include "serve/grpc_request.h"

#include <bit>
#include <cstring>

namespace vit::serve {

namespace pb = inference;

// The request's one input as InferRequest (x, n, id, classification): its data in
// raw_input_contents (what tritonclient sends) or in contents.
InferRequest parse_grpc_infer(const pb::ModelInferRequest& req, const Classifier& m, size_t max_input_bytes) {
  auto bad = [](const std::string& what) { throw RequestError(400, what); };
  if (req.inputs_size() != 1)
    bad("a request has one input: \"pixel_values\" (FP32 [N, C, H, W]) or \"image\" (BYTES [N]); got " +
        std::to_string(req.inputs_size()));
  const pb::ModelInferRequest::InferInputTensor& in = req.inputs(0);
  if (req.raw_input_contents_size() > 1)
    bad(std::to_string(req.raw_input_contents_size()) + " raw_input_contents for one input");
  const bool raw = req.raw_input_contents_size() == 1;
  if (raw && in.has_contents()) bad(in.name() + ": both contents and raw_input_contents given; give one");
  const std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
  InferRequest r;
  r.id = req.id();
  if (in.name() == "pixel_values") {
    if (in.datatype() != "FP32") bad("pixel_values: datatype must be FP32, got \"" + in.datatype() + "\"");
    r.n = pixel_batch(shape, m);
    const uint64_t per = uint64_t(m.channels() * m.height() * m.width());
    const uint64_t given =
        raw ? req.raw_input_contents(0).size() / sizeof(float) : uint64_t(in.contents().fp32_contents_size());
    const bool whole = !raw || req.raw_input_contents(0).size() % sizeof(float) == 0;
    // Compared before multiplying: a huge N would overflow.
    if (!whole || uint64_t(r.n) > given / per || uint64_t(r.n) * per != given)
      bad("pixel_values: " +
          (raw ? std::to_string(req.raw_input_contents(0).size()) + " bytes of raw_input_contents"
               : std::to_string(in.contents().fp32_contents_size()) + " fp32_contents") +
          "; shape " + shape_text(shape) + " needs " +
          std::to_string(uint64_t(r.n) * per * (raw ? sizeof(float) : 1)));
    r.x.resize(size_t(given));
    static_assert(std::endian::native == std::endian::little, "raw contents are little-endian");
    std::memcpy(r.x.data(),
                raw ? static_cast<const void*>(req.raw_input_contents(0).data())
                    : static_cast<const void*>(in.contents().fp32_contents().data()),
                given * sizeof(float));
  } else if (in.name() == "image") {
    if (in.datatype() != "BYTES")
      bad("image: datatype must be BYTES (PNG or JPEG files), got \"" + in.datatype() + "\"");
    r.n = image_batch(shape, m, max_input_bytes / sizeof(float));
    std::vector<std::string_view> files;
    if (raw) {
      files = bytes_elements(req.raw_input_contents(0), r.n);
    } else {
      if (in.contents().bytes_contents_size() != r.n)
        bad("image: " + std::to_string(in.contents().bytes_contents_size()) + " bytes_contents; shape " +
            shape_text(shape) + " needs " + std::to_string(r.n));
      for (const std::string& f : in.contents().bytes_contents()) files.push_back(f);
    }
    preprocess_images(files, m, r.x);
  } else {
    bad("unknown input \"" + in.name() +
        "\": the model takes \"pixel_values\" (FP32 [N, C, H, W]) or \"image\" (BYTES [N])");
  }
  if (const auto t = req.parameters().find("timeout"); t != req.parameters().end()) {
    if (t->second.parameter_choice_case() != pb::InferParameter::kInt64Param || t->second.int64_param() < 0)
      bad("\"timeout\" must be a non-negative int64_param (microseconds)");
    r.timeout_us = t->second.int64_param();
  }
  for (const pb::ModelInferRequest::InferRequestedOutputTensor& o : req.outputs()) {
    if (o.name() != "logits") bad("the only output is \"logits\", not \"" + o.name() + "\"");
    if (&o != &req.outputs(0))
      bad("\"outputs\" names \"logits\" twice (as Triton, an output is asked for once)");
    const auto p = o.parameters().find("classification");
    if (p == o.parameters().end()) continue;
    if (p->second.parameter_choice_case() != pb::InferParameter::kInt64Param || p->second.int64_param() < 1)
      bad("\"classification\" must be a positive int64_param (the top k)");
    r.classification = p->second.int64_param();
  }
  return r;
}

void grpc_infer_response(const std::string& model_name, const InferRequest& r,
                         const std::vector<float>& logits, const Classifier& m, pb::ModelInferResponse& res,
                         const std::string& version) {
  res.set_model_name(model_name);
  res.set_model_version(version);
  res.set_id(r.id);
  pb::ModelInferResponse::InferOutputTensor* o = res.add_outputs();
  o->set_name("logits");
  const int64_t K = m.num_classes();
  if (r.classification > 0) {
    const int64_t k = std::min(r.classification, K);
    o->set_datatype("BYTES");
    o->add_shape(r.n);
    o->add_shape(k);
    res.add_raw_output_contents(bytes_binary(classification(logits.data(), r.n, k, m)));
  } else {
    o->set_datatype("FP32");
    o->add_shape(r.n);
    o->add_shape(K);
    res.add_raw_output_contents(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float));
  }
}

void grpc_model_config(const std::string& model_name, const Classifier& m, const ModelSettings& s,
                       pb::ModelConfig& config) {
  config.set_name(model_name);
  config.set_platform("vitcpp");
  config.set_backend("vitcpp");
  config.mutable_version_policy()->mutable_latest()->set_num_versions(1);
  config.set_max_batch_size(int32_t(s.max_batch));
  pb::ModelInput* pixels = config.add_input();
  pixels->set_name("pixel_values");
  pixels->set_data_type(pb::TYPE_FP32);
  pixels->set_format(pb::ModelInput::FORMAT_NCHW);
  for (const int64_t d : {m.channels(), m.height(), m.width()}) pixels->add_dims(d);
  pixels->set_optional(true);
  pb::ModelInput* image = config.add_input();  // BYTES in the protocol is TYPE_STRING here
  image->set_name("image");
  image->set_data_type(pb::TYPE_STRING);
  image->set_format(pb::ModelInput::FORMAT_NONE);
  image->add_dims(1);
  image->set_optional(true);
  pb::ModelOutput* logits = config.add_output();
  logits->set_name("logits");
  logits->set_data_type(pb::TYPE_FP32);
  logits->add_dims(m.num_classes());
  if (s.dynamic) {
    pb::ModelDynamicBatching* b = config.mutable_dynamic_batching();
    b->set_max_queue_delay_microseconds(uint64_t(s.max_delay_us()));
    b->mutable_default_queue_policy()->set_max_queue_size(uint32_t(s.max_queue));
  }
  pb::ModelInstanceGroup* g = config.add_instance_group();
  g->set_name(model_name);
  g->set_kind(pb::ModelInstanceGroup::KIND_CPU);
  g->set_count(s.instances);
  (*config.mutable_parameters())["dtype"].set_string_value(s.dtype);
}

void grpc_statistics(const std::vector<Metrics::ModelStats>& stats, pb::ModelStatisticsResponse& res) {
  auto duration = [](const Metrics::Duration& d, pb::StatisticDuration* out) {
    out->set_count(uint64_t(d.count));
    out->set_ns(uint64_t(d.ns()));
  };
  for (const Metrics::ModelStats& s : stats) {
    pb::ModelStatistics* m = res.add_model_stats();
    m->set_name(s.name);
    m->set_version(s.version);
    m->set_last_inference(uint64_t(s.last_inference_ms));
    m->set_inference_count(uint64_t(s.inference_count));
    m->set_execution_count(uint64_t(s.execution_count));
    pb::InferStatistics* i = m->mutable_inference_stats();
    duration(s.success, i->mutable_success());
    duration(s.fail, i->mutable_fail());
    duration(s.queue, i->mutable_queue());
    duration(s.input, i->mutable_compute_input());
    duration(s.infer, i->mutable_compute_infer());
    duration(s.output, i->mutable_compute_output());
    i->mutable_cache_hit();
    for (const auto& [size, b] : s.batches) {
      pb::InferBatchStatistics* out = m->add_batch_stats();
      out->set_batch_size(uint64_t(size));
      duration(b.input, out->mutable_compute_input());
      duration(b.infer, out->mutable_compute_infer());
      duration(b.output, out->mutable_compute_output());
    }
  }
}

}  // namespace vit::serve
