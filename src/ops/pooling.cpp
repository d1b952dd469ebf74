#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

namespace {
// Tokens pooled per sample: 1, or for token pooling as many as pooled's rows hold (K*B).
int64_t token_rows(const Tensor& pooled, int64_t B, int64_t T, bool avg, const char* what) {
  if (avg || pooled.ndim() != 2 || B == 0 || pooled.dim(0) % B != 0) return 1;
  const int64_t K = pooled.dim(0) / B;
  VIT_CHECK(K >= 1 && K <= T, what, ": ", K, " tokens pooled of ", T);
  return K;
}
}  // namespace

void pool_forward(Tensor pooled, const Tensor& x, const uint8_t* mask, bool avg, int64_t first) {
  VIT_CHECK(x.ndim() == 3, "pool: x must be [B,T,C], got ", shape_str(x.shape));
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  const int64_t K = token_rows(pooled, B, T, avg, "pooled");
  check_shape(pooled, {K * B, C}, "pooled");
  VIT_CHECK(first >= 0 && first < T, "pool: first pooled token ", first, " out of ", T);
  switch (common_device({&pooled, &x}, "pool")) {
    case Device::CPU: return cpu::pool_forward(pooled.data, x.data, mask, B, T, C, avg, first, K);
    default: unsupported("pool", x.device);
  }
}

void pool_backward(Tensor dx, const Tensor& dpooled, const uint8_t* mask, bool avg, int64_t first) {
  VIT_CHECK(dx.ndim() == 3, "pool_backward: dx must be [B,T,C], got ", shape_str(dx.shape));
  const int64_t B = dx.dim(0), T = dx.dim(1), C = dx.dim(2);
  const int64_t K = token_rows(dpooled, B, T, avg, "grad pooled");
  check_shape(dpooled, {K * B, C}, "grad pooled");
  switch (common_device({&dx, &dpooled}, "pool_backward")) {
    case Device::CPU: return cpu::pool_backward(dx.data, dpooled.data, mask, B, T, C, avg, first, K);
    default: unsupported("pool_backward", dx.device);
  }
}

void first_tokens(Tensor out, const Tensor& x) {
  VIT_CHECK(x.ndim() == 3 && out.ndim() == 3, "first_tokens: x and out must be [B,T,C] and [B,Q,C], got ",
            shape_str(x.shape), " and ", shape_str(out.shape));
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), Q = out.dim(1);
  VIT_CHECK(Q >= 1 && Q <= T, "first_tokens: ", Q, " tokens of ", T);
  check_shape(out, {B, Q, C}, "first tokens");
  switch (common_device({&out, &x}, "first_tokens")) {
    case Device::CPU: return cpu::first_tokens(out.data, x.data, B, T, C, Q);
    default: unsupported("first_tokens", x.device);
  }
}

void first_tokens_backward(Tensor dx, const Tensor& dout) {
  VIT_CHECK(dx.ndim() == 3 && dout.ndim() == 3,
            "first_tokens_backward: dx and dout must be [B,T,C] and [B,Q,C]");
  const int64_t B = dx.dim(0), T = dx.dim(1), C = dx.dim(2), Q = dout.dim(1);
  VIT_CHECK(Q >= 1 && Q <= T, "first_tokens_backward: ", Q, " tokens of ", T);
  check_shape(dout, {B, Q, C}, "grad first tokens");
  switch (common_device({&dx, &dout}, "first_tokens_backward")) {
    case Device::CPU: return cpu::first_tokens_backward(dx.data, dout.data, B, T, C, Q);
    default: unsupported("first_tokens_backward", dx.device);
  }
}

}  // namespace vit::ops
