#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

namespace {
void check_residual(const Tensor& out, const Tensor& x, const Tensor& branch, const Tensor* gamma,
                    float path_p) {
  // Drop path draws one keep per sample, so the batch must be the leading dim of a
  // [B,T,C] tensor: a flattened [B*T,C] view would silently drop single tokens.
  VIT_CHECK(x.ndim() == 3, "residual: x must be [B,T,C], got ", shape_str(x.shape));
  check_shape(out, x.shape, "residual output");
  check_shape(branch, x.shape, "residual branch");
  if (gamma) check_shape(*gamma, {x.dim(2)}, "LayerScale gamma");
  VIT_CHECK(path_p >= 0.f && path_p < 1.f, "drop path: rate must be in [0, 1), got ", path_p);
}
}  // namespace

void residual_forward(Tensor out, const Tensor& x, Tensor branch, const Tensor* gamma, float drop_p,
                      uint64_t drop_key, float path_p, uint64_t path_key, int64_t first_sample) {
  check_residual(out, x, branch, gamma, path_p);
  switch (common_device({&out, &x, &branch}, "residual")) {
    case Device::CPU:
      return cpu::residual_forward(out.data, x.data, branch.data, gamma ? gamma->data : nullptr, x.dim(0),
                                   x.dim(1), x.dim(2), drop_p, drop_key, path_p, path_key, first_sample);
    default: unsupported("residual", out.device);
  }
}

void residual_layernorm_forward(Tensor out, const Tensor& x, Tensor branch, const Tensor* gamma, float drop_p,
                                uint64_t drop_key, float path_p, uint64_t path_key, int64_t first_sample,
                                const NormOut& norm) {
  check_residual(out, x, branch, gamma, path_p);
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  VIT_CHECK(norm.y.numel() == B * T * C, "residual layernorm: output has ", norm.y.numel(),
            " elements, want ", B * T * C);
  check_shape(norm.mean, {B * T}, "layernorm mean");
  check_shape(norm.rstd, {B * T}, "layernorm rstd");
  check_shape(norm.w, {C}, "layernorm weight");
  check_shape(norm.b, {C}, "layernorm bias");
  switch (common_device({&out, &x, &branch, &norm.y, &norm.w}, "residual_layernorm")) {
    case Device::CPU:
      return cpu::residual_layernorm_forward(
          out.data, x.data, branch.data, gamma ? gamma->data : nullptr, B, T, C, drop_p, drop_key, path_p,
          path_key, first_sample,
          cpu::NormOut{norm.y.data, norm.mean.data, norm.rstd.data, norm.w.data, norm.b.data, norm.eps});
    default: unsupported("residual_layernorm", out.device);
  }
}

void residual_backward(Tensor dbranch, Tensor* dgamma, const Tensor& dout, const Tensor* branch,
                       const Tensor* gamma, float drop_p, uint64_t drop_key, float path_p, uint64_t path_key,
                       int64_t first_sample) {
  VIT_CHECK(dout.ndim() == 3, "residual_backward: grad must be [B,T,C], got ", shape_str(dout.shape));
  check_shape(dbranch, dout.shape, "residual grad branch");
  VIT_CHECK(!dgamma || (gamma && branch), "residual_backward: dgamma needs gamma and the branch");
  if (gamma) check_shape(*gamma, {dout.dim(2)}, "LayerScale gamma");
  if (dgamma) check_shape(*dgamma, {dout.dim(2)}, "grad LayerScale gamma");
  if (branch) check_shape(*branch, dout.shape, "residual branch");
  switch (common_device({&dbranch, &dout}, "residual_backward")) {
    case Device::CPU:
      return cpu::residual_backward(dbranch.data, dgamma ? dgamma->data : nullptr, dout.data,
                                    branch ? branch->data : nullptr, gamma ? gamma->data : nullptr,
                                    dout.dim(0), dout.dim(1), dout.dim(2), drop_p, drop_key, path_p, path_key,
                                    first_sample);
    default: unsupported("residual_backward", dout.device);
  }
}

}  // namespace vit::ops
