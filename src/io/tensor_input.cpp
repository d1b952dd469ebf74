#include "io/tensor_input.h"

#include "core/check.h"

namespace vit {

TensorSpec parse_tensor_spec(const std::string& spec) {
  const auto colon = spec.rfind(':');
  VIT_CHECK(colon != std::string::npos, "--tensor wants FILE.safetensors:NAME, got '", spec, "'");
  TensorSpec s{spec.substr(0, colon), spec.substr(colon + 1)};
  VIT_CHECK(!s.file.empty(), "--tensor '", spec, "': no file before the colon");
  VIT_CHECK(!s.name.empty(), "--tensor '", spec, "': no tensor name after the colon");
  return s;
}

std::vector<float> read_tensor_input(const SafeTensors& st, const std::string& name, int64_t C, int64_t H,
                                     int64_t W, int64_t* rows) {
  const TensorInfo& t = st.at(name);
  const Shape want = {t.shape.empty() ? 0 : t.shape[0], C, H, W};
  VIT_CHECK(t.shape == want && want[0] > 0, st.path(), ":", name, ": shape ", shape_str(t.shape),
            ", the model takes [B, ", C, ", ", H, ", ", W, "] with B >= 1");
  *rows = want[0];
  return st.to_float(name);
}

}  // namespace vit
