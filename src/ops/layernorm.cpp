#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

void layernorm_forward(Tensor y, Tensor mean, Tensor rstd, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps) {
  VIT_CHECK(x.ndim() == 2, "layernorm: x must be 2-D [M,C], got ", shape_str(x.shape));
  const int64_t M = x.dim(0), C = x.dim(1);
  check_shape(y, x.shape, "layernorm output");
  check_shape(w, {C}, "layernorm weight");
  check_shape(b, {C}, "layernorm bias");
  check_shape(mean, {M}, "layernorm mean");
  check_shape(rstd, {M}, "layernorm rstd");
  switch (common_device({&y, &x, &w, &b}, "layernorm")) {
    case Device::CPU:
      return cpu::layernorm_forward(y.data, mean.data, rstd.data, x.data, w.data, b.data, M, C, eps);
    default: unsupported("layernorm", y.device);
  }
}

void layernorm_backward(Tensor dx, Tensor dw, Tensor db, const Tensor& dy, const Tensor& x,
                        const Tensor& mean, const Tensor& rstd, const Tensor& w, bool accumulate_dx,
                        Tensor* dx_colsum) {
  const int64_t M = x.dim(0), C = x.dim(1);
  VIT_CHECK(dx.data || !dx_colsum, "layernorm_backward: column sums of dx need dx");
  if (dx_colsum) check_shape(*dx_colsum, {C}, "layernorm grad input column sums");
  check_shape(dy, x.shape, "layernorm grad output");
  if (dx.data) check_shape(dx, x.shape, "layernorm grad input");
  check_shape(dw, {C}, "layernorm grad weight");
  check_shape(db, {C}, "layernorm grad bias");
  switch (common_device({&dy, &x, &w}, "layernorm_backward")) {
    case Device::CPU:
      return cpu::layernorm_backward(dx.data, dw.data, db.data, dy.data, x.data, mean.data, rstd.data, w.data,
                                     M, C, accumulate_dx, dx_colsum ? dx_colsum->data : nullptr);
    default: unsupported("layernorm_backward", dx.device);
  }
}

}  // namespace vit::ops
