// vit serve's infer request parsing (src/serve/protocol.cpp): the Open Inference Protocol's
// JSON bodies and its binary tensor data extension, and KServe V1's predict bodies
// (protocol_v1.cpp). The first two bytes give the Inference-Header-Content-Length
// (little-endian; 0: none; 0xffff: the body is V1's), the rest is the body, parsed for
// the timm_a fixture (3x32x32, 5 classes; VIT_FUZZ_FIXTURES names tests/fixtures/pretrained)
// with a 1 MB input limit; a request that parses is answered as the server would, and one
// that does not gets its error body.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "serve/protocol.h"
#include "serve/protocol_v1.h"
#include "vit/classifier.h"

namespace {
std::unique_ptr<vit::Classifier> model;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model = std::make_unique<vit::Classifier>(vit::fuzz::fixture("timm_a"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t json_length = size_t(data[0]) | size_t(data[1]) << 8;
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    if (json_length == 0xffff) {
      const vit::serve::InferRequest r = vit::serve::parse_v1_predict(body, *model, 1 << 20);
      (void)vit::serve::v1_predict_response(std::vector<float>(size_t(r.n * model->num_classes()), 0.5f),
                                            *model);
      return 0;
    }
    const vit::serve::InferRequest r = vit::serve::parse_infer(body, *model, json_length, 1 << 20);
    const std::vector<float> logits(size_t(r.n * model->num_classes()), 0.5f);
    (void)vit::serve::infer_response("a", r, logits, *model);
  } catch (const vit::Error& e) {
    (void)vit::serve::error_json(e.what());  // the 400's body: must not throw either
  }
  return 0;
}
