// vit serve's gRPC ModelInfer request reading (src/serve/grpc_request.cpp): the input is a
// serialized inference.ModelInferRequest (src/serve/inference.proto), read for the timm_a
// fixture (3x32x32, 5 classes; VIT_FUZZ_FIXTURES names tests/fixtures/pretrained) with a 1 MB
// input limit. A request that reads is answered as the server would; one that does not must
// throw RequestError, nothing else.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "serve/grpc_request.h"
#include "vit/classifier.h"

namespace {
std::unique_ptr<vit::Classifier> model;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model = std::make_unique<vit::Classifier>(vit::fuzz::fixture("timm_a"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest req;
  if (!req.ParseFromArray(data, int(size))) return 0;
  try {
    const vit::serve::InferRequest r = vit::serve::parse_grpc_infer(req, *model, 1 << 20);
    if (int64_t(r.x.size()) != r.n * model->channels() * model->height() * model->width()) std::abort();
    const std::vector<float> logits(size_t(r.n * model->num_classes()), 0.5f);
    inference::ModelInferResponse res;
    vit::serve::grpc_infer_response("a", r, logits, *model, res);
  } catch (const vit::serve::RequestError&) {
  }
  return 0;
}
