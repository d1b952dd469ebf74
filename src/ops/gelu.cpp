#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

void gelu_forward(Tensor y, const Tensor& x) {
  check_shape(y, x.shape, "gelu output");
  switch (common_device({&y, &x}, "gelu")) {
    case Device::CPU: return cpu::gelu_forward(y.data, x.data, x.numel());
    default: unsupported("gelu", y.device);
  }
}

void gelu_backward(Tensor dx, const Tensor& dy, const Tensor& x) {
  check_shape(dx, x.shape, "gelu grad input");
  check_shape(dy, x.shape, "gelu grad output");
  switch (common_device({&dx, &dy, &x}, "gelu_backward")) {
    case Device::CPU: return cpu::gelu_backward(dx.data, dy.data, x.data, x.numel());
    default: unsupported("gelu_backward", dx.device);
  }
}

}  // namespace vit::ops
