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

void bias_gelu_forward(Tensor y, Tensor h, const Tensor& bias, bool keep_grad) {
  check_shape(y, h.shape, "gelu output");
  VIT_CHECK(h.ndim() >= 1, "bias_gelu: input must have a last dimension");
  const int64_t N = h.dim(h.ndim() - 1);
  check_shape(bias, {N}, "bias_gelu bias");
  switch (common_device({&y, &h, &bias}, "bias_gelu")) {
    case Device::CPU: return cpu::bias_gelu_forward(y.data, h.data, bias.data, h.numel() / N, N, keep_grad);
    default: unsupported("bias_gelu", y.device);
  }
}

void bias_gelu_backward(Tensor dx, Tensor& dbias, const Tensor& dy, Tensor grad, bool clear_grad) {
  check_shape(dx, grad.shape, "gelu grad input");
  check_shape(dy, grad.shape, "gelu grad output");
  VIT_CHECK(grad.ndim() >= 1, "bias_gelu_backward: input must have a last dimension");
  const int64_t N = grad.dim(grad.ndim() - 1);
  check_shape(dbias, {N}, "gelu grad bias");
  switch (common_device({&dx, &dy, &grad, &dbias}, "bias_gelu_backward")) {
    case Device::CPU:
      return cpu::bias_gelu_backward(dx.data, dbias.data, dy.data, grad.data, grad.numel() / N, N,
                                     clear_grad);
    default: unsupported("bias_gelu_backward", dx.device);
  }
}

}  // namespace vit::ops
