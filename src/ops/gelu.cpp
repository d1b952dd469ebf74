#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "vit/ops/ops.h"

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

void bias_gelu_forward(Tensor y, Tensor h, const Tensor& bias) {
  check_shape(y, h.shape, "gelu output");
  VIT_CHECK(h.ndim() >= 1, "bias_gelu: input must have a last dimension");
  const int64_t N = h.dim(h.ndim() - 1);
  check_shape(bias, {N}, "bias_gelu bias");
  switch (common_device({&y, &h, &bias}, "bias_gelu")) {
    case Device::CPU: return cpu::bias_gelu_forward(y.data, h.data, bias.data, h.numel() / N, N);
    default: unsupported("bias_gelu", y.device);
  }
}

void gelu_backward(Tensor dx, const Tensor& dy, const Tensor& x, Tensor& dbias) {
  check_shape(dx, x.shape, "gelu grad input");
  check_shape(dy, x.shape, "gelu grad output");
  VIT_CHECK(x.ndim() >= 1, "gelu_backward: input must have a last dimension");
  const int64_t N = x.dim(x.ndim() - 1);
  check_shape(dbias, {N}, "gelu grad bias");
  switch (common_device({&dx, &dy, &x, &dbias}, "gelu_backward")) {
    case Device::CPU:
      return cpu::gelu_backward_colsum(dx.data, dbias.data, dy.data, x.data, x.numel() / N, N);
    default: unsupported("gelu_backward", dx.device);
  }
}

}  // namespace vit::ops
