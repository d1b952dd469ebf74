#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "vit/ops/ops.h"

namespace vit::ops {

void dropout_forward(Tensor x, float p, uint64_t key) {
  VIT_CHECK(p >= 0.f && p < 1.f, "dropout: rate must be in [0, 1), got ", p);
  switch (x.device) {
    case Device::CPU: return cpu::dropout_forward(x.data, x.numel(), p, key);
    default: unsupported("dropout", x.device);
  }
}

void dropout_backward(Tensor dx, float p, uint64_t key) {
  switch (dx.device) {
    case Device::CPU: return cpu::dropout_backward(dx.data, dx.numel(), p, key);
    default: unsupported("dropout_backward", dx.device);
  }
}

void residual_forward(Tensor out, const Tensor& x, Tensor branch, float drop_p, uint64_t drop_key,
                      float path_p, uint64_t path_key) {
  // Drop path draws one keep per sample, so the batch must be the leading dim of a
  // [B,T,C] tensor: a flattened [B*T,C] view would silently drop single tokens.
  VIT_CHECK(x.ndim() == 3, "residual: x must be [B,T,C], got ", shape_str(x.shape));
  check_shape(out, x.shape, "residual output");
  check_shape(branch, x.shape, "residual branch");
  VIT_CHECK(path_p >= 0.f && path_p < 1.f, "drop path: rate must be in [0, 1), got ", path_p);
  const int64_t B = x.dim(0), R = x.numel() / B;
  switch (common_device({&out, &x, &branch}, "residual")) {
    case Device::CPU:
      return cpu::residual_forward(out.data, x.data, branch.data, B, R, drop_p, drop_key, path_p, path_key);
    default: unsupported("residual", out.device);
  }
}

void residual_backward(Tensor dbranch, const Tensor& dout, float drop_p, uint64_t drop_key, float path_p,
                       uint64_t path_key) {
  VIT_CHECK(dout.ndim() == 3, "residual_backward: grad must be [B,T,C], got ", shape_str(dout.shape));
  check_shape(dbranch, dout.shape, "residual grad branch");
  const int64_t B = dout.dim(0), R = dout.numel() / B;
  switch (common_device({&dbranch, &dout}, "residual_backward")) {
    case Device::CPU:
      return cpu::residual_backward(dbranch.data, dout.data, B, R, drop_p, drop_key, path_p, path_key);
    default: unsupported("residual_backward", dout.device);
  }
}

}  // namespace vit::ops
