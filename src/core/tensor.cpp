#include "core/tensor.h"

#include "core/check.h"

namespace vit {

const char* device_name(Device d) {
  return d == Device::CPU ? "cpu" : "cuda";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Tensor reshape(const Tensor& t, Shape s) {
  VIT_CHECK(numel(s) == t.numel(), "reshape: ", shape_str(t.shape), " has ", t.numel(), " elements, ",
            shape_str(s), " needs ", numel(s));
  return Tensor(t.data, std::move(s), t.device);
}

void check_shape(const Tensor& t, const Shape& want, const char* what) {
  VIT_CHECK(t.shape == want, what, ": expected shape ", shape_str(want), ", got ", shape_str(t.shape));
}

Device common_device(std::initializer_list<const Tensor*> ts, const char* op) {
  Device d = (*ts.begin())->device;
  for (auto* t : ts)
    VIT_CHECK(t->device == d, op, ": tensors on different devices (", device_name(d), " and ",
              device_name(t->device), ")");
  return d;
}

}  // namespace vit
