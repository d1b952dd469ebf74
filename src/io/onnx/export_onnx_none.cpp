// vitonnx in a build configured with -DVIT_ONNX=OFF: ONNX export says it is not there.
#include "core/check.h"
#include "io/onnx_export.h"

namespace vit {

namespace {
[[noreturn]] void unavailable() {
  throw Error(
      "this vitcpp was built without ONNX export (-DVIT_ONNX=OFF); install libonnx-dev and "
      "libprotobuf-dev (scripts/setup.sh) and configure with -DVIT_ONNX=ON");
}
}  // namespace

bool onnx_export_available() {
  return false;
}

OnnxExportInfo export_onnx(const ViT&, const std::string&, const std::vector<std::string>&, int64_t, bool) {
  unavailable();
}

std::string check_onnx_file(const std::string&) {
  unavailable();
}

}  // namespace vit
