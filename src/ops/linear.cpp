#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "vit/ops/ops.h"

namespace vit::ops {

void linear_forward(Tensor y, const Tensor& x, const Tensor& w, const Tensor* b, bool y_zero) {
  VIT_CHECK(x.ndim() == 2 && w.ndim() == 2, "linear: x and w must be 2-D, got ", shape_str(x.shape), " and ",
            shape_str(w.shape));
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  check_shape(w, {N, K}, "linear weight");
  check_shape(y, {M, N}, "linear output");
  if (b) check_shape(*b, {N}, "linear bias");
  switch (common_device({&y, &x, &w}, "linear")) {
    case Device::CPU:
      return cpu::linear_forward(y.data, x.data, w.data, b ? b->data : nullptr, M, K, N, y_zero);
    default: unsupported("linear", y.device);
  }
}

bool linear_uses_zero_output(int64_t M, int64_t K, int64_t N) {
  return cpu::adds_onto_zeros(M, N, K);
}

void pack_linear_inplace(Tensor& w) {
  VIT_CHECK(w.ndim() == 2, "linear pack: w must be 2-D, got ", shape_str(w.shape));
  switch (w.device) {
    case Device::CPU: return cpu::pack_linear_weights(w.data, w.dim(0), w.dim(1));
    default: unsupported("linear_pack", w.device);
  }
}

bool packed_linear_preferred(int64_t M) {
  return cpu::packed_linear_preferred(M);
}

void unpack_linear_inplace(Tensor& w) {
  VIT_CHECK(w.ndim() == 2, "linear unpack: w must be 2-D, got ", shape_str(w.shape));
  switch (w.device) {
    case Device::CPU: return cpu::unpack_linear_weights(w.data, w.dim(0), w.dim(1));
    default: unsupported("linear_unpack", w.device);
  }
}

void linear_forward_packed(Tensor y, const Tensor& x, const Tensor& w, const Tensor* b, bool gelu) {
  VIT_CHECK(x.ndim() == 2 && w.ndim() == 2, "linear packed: x and w must be 2-D, got ", shape_str(x.shape),
            " and ", shape_str(w.shape));
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  check_shape(w, {N, K}, "linear packed weight");
  check_shape(y, {M, N}, "linear packed output");
  if (b) check_shape(*b, {N}, "linear packed bias");
  switch (common_device({&y, &x, &w}, "linear_packed")) {
    case Device::CPU:
      return cpu::linear_forward_packed(y.data, x.data, w.data, b ? b->data : nullptr, M, K, N, gelu);
    default: unsupported("linear_packed", y.device);
  }
}

struct PackedLinear {
  Device device;
  int64_t N, K;
  std::shared_ptr<cpu::PackedBf16> cpu;
};

bool bf16_available() {
  return cpu::bf16_matmul_available();
}

std::shared_ptr<PackedLinear> pack_linear_bf16(const Tensor& w) {
  VIT_CHECK(w.ndim() == 2, "linear bf16: w must be 2-D, got ", shape_str(w.shape));
  const int64_t N = w.dim(0), K = w.dim(1);
  switch (w.device) {
    case Device::CPU:
      return std::make_shared<PackedLinear>(PackedLinear{w.device, N, K, cpu::pack_bf16(w.data, N, K)});
    default: unsupported("linear_bf16", w.device);
  }
}

void linear_forward_bf16(Tensor y, const Tensor& x, PackedLinear& w, const Tensor* b) {
  VIT_CHECK(x.ndim() == 2, "linear bf16: x must be 2-D, got ", shape_str(x.shape));
  const int64_t M = x.dim(0);
  check_shape(x, {M, w.K}, "linear bf16 input");
  check_shape(y, {M, w.N}, "linear bf16 output");
  if (b) check_shape(*b, {w.N}, "linear bf16 bias");
  switch (common_device({&y, &x}, "linear_bf16")) {
    case Device::CPU: return cpu::linear_forward_bf16(y.data, x.data, *w.cpu, b ? b->data : nullptr, M);
    default: unsupported("linear_bf16", y.device);
  }
}

void mlp_forward_bf16(Tensor y, const Tensor& x, PackedLinear& fc1, const Tensor& b1, PackedLinear& fc2,
                      const Tensor& b2) {
  VIT_CHECK(x.ndim() == 2, "mlp bf16: x must be 2-D, got ", shape_str(x.shape));
  const int64_t M = x.dim(0);
  VIT_CHECK(fc2.K == fc1.N, "mlp bf16: fc2 takes ", fc2.K, " inputs, fc1 gives ", fc1.N);
  check_shape(x, {M, fc1.K}, "mlp bf16 input");
  check_shape(y, {M, fc2.N}, "mlp bf16 output");
  check_shape(b1, {fc1.N}, "mlp bf16 fc1 bias");
  check_shape(b2, {fc2.N}, "mlp bf16 fc2 bias");
  switch (common_device({&y, &x}, "mlp_bf16")) {
    case Device::CPU: return cpu::mlp_forward_bf16(y.data, x.data, *fc1.cpu, b1.data, *fc2.cpu, b2.data, M);
    default: unsupported("mlp_bf16", y.device);
  }
}

void round_to_bf16(uint16_t* dst, const Tensor& x) {
  switch (x.device) {
    case Device::CPU: return cpu::round_to_bf16(dst, x.data, x.numel());
    default: unsupported("round_to_bf16", x.device);
  }
}

void linear_forward_amp(Tensor y, const Tensor& x, uint16_t* xb, const Tensor& w, const uint16_t* wb,
                        const Tensor* b) {
  VIT_CHECK(x.ndim() == 2 && w.ndim() == 2, "linear amp: x and w must be 2-D, got ", shape_str(x.shape),
            " and ", shape_str(w.shape));
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  check_shape(w, {N, K}, "linear amp weight");
  check_shape(y, {M, N}, "linear amp output");
  if (b) check_shape(*b, {N}, "linear amp bias");
  switch (common_device({&y, &x, &w}, "linear_amp")) {
    case Device::CPU:
      cpu::round_to_bf16(xb, x.data, M * K);
      return cpu::linear_forward_amp(y.data, xb, wb, b ? b->data : nullptr, M, K, N);
    default: unsupported("linear_amp", y.device);
  }
}

void linear_backward_amp(Tensor* dx, Tensor* dw, Tensor* db, const Tensor& dy, const Tensor& x,
                         const uint16_t* xb, const Tensor& w, const uint16_t* wb) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  check_shape(dy, {M, N}, "linear amp grad output");
  if (dx) check_shape(*dx, {M, K}, "linear amp grad input");
  if (dw) check_shape(*dw, {N, K}, "linear amp grad weight");
  if (db) check_shape(*db, {N}, "linear amp grad bias");
  switch (common_device({&dy, &x, &w}, "linear_backward_amp")) {
    case Device::CPU:
      return cpu::linear_backward_amp(dx ? dx->data : nullptr, dw ? dw->data : nullptr,
                                      db ? db->data : nullptr, dy.data, xb, wb, M, K, N);
    default: unsupported("linear_backward_amp", dy.device);
  }
}

void linear_backward(Tensor* dx, Tensor* dw, Tensor* db, const Tensor& dy, const Tensor& x, const Tensor& w,
                     bool accumulate_dx) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  check_shape(dy, {M, N}, "linear grad output");
  if (dx) check_shape(*dx, {M, K}, "linear grad input");
  if (dw) check_shape(*dw, {N, K}, "linear grad weight");
  if (db) check_shape(*db, {N}, "linear grad bias");
  switch (common_device({&dy, &x, &w}, "linear_backward")) {
    case Device::CPU:
      return cpu::linear_backward(dx ? dx->data : nullptr, dw ? dw->data : nullptr, db ? db->data : nullptr,
                                  dy.data, x.data, w.data, M, K, N, accumulate_dx);
    default: unsupported("linear_backward", dy.device);
  }
}

}  // namespace vit::ops
