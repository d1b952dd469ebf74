#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

void dropout_forward(Tensor x, float p, uint64_t key, int64_t first) {
  VIT_CHECK(p >= 0.f && p < 1.f, "dropout: rate must be in [0, 1), got ", p);
  switch (x.device) {
    case Device::CPU: return cpu::dropout_forward(x.data, x.numel(), p, key, first);
    default: unsupported("dropout", x.device);
  }
}

void dropout_backward(Tensor dx, float p, uint64_t key, int64_t first) {
  switch (dx.device) {
    case Device::CPU: return cpu::dropout_backward(dx.data, dx.numel(), p, key, first);
    default: unsupported("dropout_backward", dx.device);
  }
}

}  // namespace vit::ops
