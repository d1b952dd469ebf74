#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "vit/ops/ops.h"

namespace vit::ops {

void pool_forward(Tensor pooled, const Tensor& x, const uint8_t* mask, bool avg, int64_t first) {
  VIT_CHECK(x.ndim() == 3, "pool: x must be [B,T,C], got ", shape_str(x.shape));
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  check_shape(pooled, {B, C}, "pooled");
  VIT_CHECK(first >= 0 && first < T, "pool: first pooled token ", first, " out of ", T);
  switch (common_device({&pooled, &x}, "pool")) {
    case Device::CPU: return cpu::pool_forward(pooled.data, x.data, mask, B, T, C, avg, first);
    default: unsupported("pool", x.device);
  }
}

void pool_backward(Tensor dx, const Tensor& dpooled, const uint8_t* mask, bool avg, int64_t first) {
  const int64_t B = dx.dim(0), T = dx.dim(1), C = dx.dim(2);
  check_shape(dpooled, {B, C}, "grad pooled");
  switch (common_device({&dx, &dpooled}, "pool_backward")) {
    case Device::CPU: return cpu::pool_backward(dx.data, dpooled.data, mask, B, T, C, avg, first);
    default: unsupported("pool_backward", dx.device);
  }
}

}  // namespace vit::ops
