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
  for (const pb::ModelInferRequest::InferRequestedOutputTensor& o : req.outputs()) {
    if (o.name() != "logits") bad("the only output is \"logits\", not \"" + o.name() + "\"");
    const auto p = o.parameters().find("classification");
    if (p == o.parameters().end()) continue;
    if (p->second.parameter_choice_case() != pb::InferParameter::kInt64Param || p->second.int64_param() < 1)
      bad("\"classification\" must be a positive int64_param (the top k)");
    r.classification = p->second.int64_param();
  }
  return r;
}

void grpc_infer_response(const std::string& model_name, const InferRequest& r,
                         const std::vector<float>& logits, const Classifier& m, pb::ModelInferResponse& res) {
  res.set_model_name(model_name);
  res.set_model_version("1");
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

}  // namespace vit::serve
