#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

void copy(Tensor dst, const Tensor& src) {
  VIT_CHECK(dst.numel() == src.numel(), "copy: ", shape_str(src.shape), " into ", shape_str(dst.shape));
  switch (common_device({&dst, &src}, "copy")) {
    case Device::CPU: return cpu::copy_values(dst.data, src.data, src.numel());
    default: unsupported("copy", dst.device);
  }
}

void fill(Tensor x, float value) {
  switch (x.device) {
    case Device::CPU: return cpu::fill_values(x.data, x.numel(), value);
    default: unsupported("fill", x.device);
  }
}

void add_into(Tensor dst, const Tensor& src) {
  VIT_CHECK(dst.numel() == src.numel(), "add_into: ", shape_str(src.shape), " into ", shape_str(dst.shape));
  switch (common_device({&dst, &src}, "add_into")) {
    case Device::CPU: return cpu::add_into(dst.data, src.data, src.numel());
    default: unsupported("add_into", dst.device);
  }
}

void scale(Tensor x, float s) {
  switch (x.device) {
    case Device::CPU: return cpu::scale_values(x.data, x.numel(), s);
    default: unsupported("scale", x.device);
  }
}

void mean_of_two(Tensor dst, const Tensor& a, const Tensor& b) {
  VIT_CHECK(dst.numel() == a.numel() && dst.numel() == b.numel(), "mean_of_two: ", shape_str(a.shape),
            " and ", shape_str(b.shape), " into ", shape_str(dst.shape));
  switch (common_device({&dst, &a, &b}, "mean_of_two")) {
    case Device::CPU: return cpu::mean_of_two(dst.data, a.data, b.data, dst.numel());
    default: unsupported("mean_of_two", dst.device);
  }
}

void argmax_rows(int64_t* out, const Tensor& x) {
  VIT_CHECK(x.ndim() == 2, "argmax_rows: x must be 2-D, got ", shape_str(x.shape));
  switch (x.device) {
    case Device::CPU: return cpu::argmax_rows(out, x.data, x.dim(0), x.dim(1));
    default: unsupported("argmax_rows", x.device);
  }
}

}  // namespace vit::ops
