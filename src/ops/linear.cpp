#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

struct PreparedLinear {
  std::shared_ptr<cpu::PackedBf16> bf16;
  std::shared_ptr<cpu::Int8Weights> int8;
};

namespace {

// w's shape, and b's when present.
void check_weights(const LinearWeights& lw, const char* op) {
  VIT_CHECK(lw.w.ndim() == 2, op, ": w must be 2-D, got ", shape_str(lw.w.shape));
  if (lw.b.data) check_shape(lw.b, {lw.w.dim(0)}, "linear bias");
  VIT_CHECK((lw.precision != Precision::bf16 && lw.precision != Precision::int8) || lw.prepared, op,
            ": bf16 or int8 weights not prepared (prepare_linear)");
  VIT_CHECK(lw.precision != Precision::amp || lw.w_bf16, op, ": amp weights not prepared (prepare_linear)");
}

cpu::LinearOperand cpu_operand(const LinearWeights& lw) {
  return {lw.w.data,
          lw.b.data,
          lw.w.dim(0),
          lw.w.dim(1),
          lw.precision,
          lw.packed,
          lw.prepared ? lw.prepared->bf16.get() : nullptr,
          lw.prepared ? lw.prepared->int8.get() : nullptr,
          lw.w_bf16};
}

}  // namespace

void prepare_linear(LinearWeights& lw, Precision precision, bool packed, uint16_t* amp_store) {
  check_weights(lw, "prepare_linear");
  VIT_CHECK(!packed || precision == Precision::fp32, "prepare_linear: only fp32 weights are packed");
  VIT_CHECK(precision != Precision::amp || amp_store, "prepare_linear: amp needs a store for the bf16 copy");
  const int64_t N = lw.w.dim(0), K = lw.w.dim(1);
  switch (lw.w.device) {
    case Device::CPU:
      if (lw.packed != packed)
        packed ? cpu::pack_linear_weights(lw.w.data, N, K) : cpu::unpack_linear_weights(lw.w.data, N, K);
      lw.prepared = nullptr;
      if (precision == Precision::bf16)
        lw.prepared =
            std::make_shared<PreparedLinear>(PreparedLinear{cpu::pack_bf16(lw.w.data, N, K), nullptr});
      if (precision == Precision::int8)
        lw.prepared =
            std::make_shared<PreparedLinear>(PreparedLinear{nullptr, cpu::pack_int8(lw.w.data, N, K)});
      if (precision == Precision::amp) cpu::round_to_bf16(amp_store, lw.w.data, N * K);
      break;
    default: unsupported("prepare_linear", lw.w.device);
  }
  lw.packed = packed;
  lw.precision = precision;
  lw.w_bf16 = precision == Precision::amp ? amp_store : nullptr;
}

void quantize_int8_weights(int8_t* q, float* scale, const float* w, int64_t N, int64_t K) {
  cpu::quantize_weights_s8(q, scale, w, N, K);
}

bool bf16_available(Device d) {
  switch (d) {
    case Device::CPU: return cpu::bf16_matmul_available();
    default: return false;
  }
}

std::string bf16_missing(Device d) {
  switch (d) {
    case Device::CPU: return cpu::bf16_matmul_missing();
    default: return "this device has no bf16 matrix product";
  }
}

std::string bf16_emulated(Device d) {
  switch (d) {
    case Device::CPU: return cpu::bf16_matmul_emulated();
    default: return "";
  }
}

bool packed_linear_preferred(int64_t M, Device d) {
  switch (d) {
    case Device::CPU: return cpu::packed_linear_preferred(M);
    default: return false;
  }
}

void linear_forward(Tensor y, const Tensor& x, const LinearWeights& w, Epilogue epilogue, uint16_t* x_bf16) {
  check_weights(w, "linear");
  VIT_CHECK(x.ndim() == 2, "linear: x must be 2-D, got ", shape_str(x.shape));
  const int64_t M = x.dim(0), K = x.dim(1), N = w.w.dim(0);
  check_shape(w.w, {N, K}, "linear weight");
  check_shape(y, {M, N}, "linear output");
  VIT_CHECK(w.precision != Precision::amp || x_bf16, "linear amp: x_bf16 is needed for the input's copy");
  switch (common_device({&y, &x, &w.w}, "linear")) {
    case Device::CPU:
      return cpu::linear_forward(y.data, x.data, x_bf16, cpu_operand(w), M, epilogue == Epilogue::gelu);
    default: unsupported("linear", y.device);
  }
}

void linear_backward(Tensor* dx, Tensor* dw, Tensor* db, const Tensor& dy, const Tensor& x,
                     const LinearWeights& w, const uint16_t* x_bf16, bool accumulate_dx) {
  check_weights(w, "linear_backward");
  VIT_CHECK(!w.packed && w.precision != Precision::bf16,
            "linear_backward: weights prepared for inference only");
  VIT_CHECK(w.precision != Precision::amp || (x_bf16 && !accumulate_dx),
            "linear_backward amp: needs the forward's x_bf16 and assigns dx");
  const int64_t M = x.dim(0), K = x.dim(1), N = w.w.dim(0);
  check_shape(w.w, {N, K}, "linear weight");
  check_shape(dy, {M, N}, "linear grad output");
  if (dx) check_shape(*dx, {M, K}, "linear grad input");
  if (dw) check_shape(*dw, {N, K}, "linear grad weight");
  if (db) check_shape(*db, {N}, "linear grad bias");
  switch (common_device({&dy, &x, &w.w}, "linear_backward")) {
    case Device::CPU:
      return cpu::linear_backward(dx ? dx->data : nullptr, dw ? dw->data : nullptr, db ? db->data : nullptr,
                                  dy.data, x.data, x_bf16, cpu_operand(w), M, accumulate_dx);
    default: unsupported("linear_backward", dy.device);
  }
}

void round_to_bf16(uint16_t* dst, const Tensor& x) {
  switch (x.device) {
    case Device::CPU: return cpu::round_to_bf16(dst, x.data, x.numel());
    default: unsupported("round_to_bf16", x.device);
  }
}

namespace {
cpu::MlpBuffers cpu_buffers(MlpActs& a) {
  return {a.h.data, a.act.data, a.x_bf16, a.act_bf16, &a.h_zero};
}
void check_mlp(const Tensor& y, const Tensor& x, const LinearWeights& fc1, const LinearWeights& fc2,
               const MlpActs& a) {
  check_weights(fc1, "mlp fc1");
  check_weights(fc2, "mlp fc2");
  VIT_CHECK(fc1.precision == fc2.precision && fc1.packed == fc2.packed,
            "mlp: fc1 and fc2 must be prepared alike");
  VIT_CHECK(fc1.b.data && fc2.b.data, "mlp: fc1 and fc2 need their biases");
  VIT_CHECK(x.ndim() == 2, "mlp: x must be 2-D, got ", shape_str(x.shape));
  const int64_t M = x.dim(0), C = x.dim(1), Hd = fc1.w.dim(0);
  check_shape(fc1.w, {Hd, C}, "mlp fc1 weight");
  check_shape(fc2.w, {fc2.w.dim(0), Hd}, "mlp fc2 weight");
  check_shape(y, {M, fc2.w.dim(0)}, "mlp output");
  check_shape(a.h, {M, Hd}, "mlp fc1 output");
  check_shape(a.act, {M, Hd}, "mlp activation");
  VIT_CHECK(fc1.precision != Precision::amp || (a.x_bf16 && a.act_bf16),
            "mlp amp: the bf16 copies are needed");
}
}  // namespace

void mlp_forward(Tensor y, const Tensor& x, const LinearWeights& fc1, const LinearWeights& fc2, MlpActs& a,
                 bool keep_grad, const DropoutSite& drop, Activation act) {
  check_mlp(y, x, fc1, fc2, a);
  VIT_CHECK(drop.p >= 0.f && drop.p < 1.f, "dropout: rate must be in [0, 1), got ", drop.p);
  VIT_CHECK(!(fc1.packed || fc1.precision == Precision::bf16) || (drop.p == 0.f && !keep_grad),
            "mlp: weights prepared for inference only");
  switch (common_device({&y, &x, &fc1.w, &fc2.w, &a.h}, "mlp")) {
    case Device::CPU:
      return cpu::mlp_forward(y.data, x.data, cpu_operand(fc1), cpu_operand(fc2), cpu_buffers(a), x.dim(0),
                              keep_grad, drop.p, drop.key, drop.first, act);
    default: unsupported("mlp", y.device);
  }
}

void mlp_backward(Tensor dx, Tensor dact, Tensor& dw1, Tensor& db1, Tensor& dw2, Tensor* db2,
                  const Tensor& dy, const Tensor& x, const LinearWeights& fc1, const LinearWeights& fc2,
                  MlpActs& a, const DropoutSite& drop) {
  check_mlp(dy, x, fc1, fc2, a);
  VIT_CHECK(!fc1.packed && fc1.precision != Precision::bf16,
            "mlp_backward: weights prepared for inference only");
  check_shape(dx, x.shape, "mlp grad input");
  check_shape(dact, a.h.shape, "mlp grad activation");
  check_shape(dw1, fc1.w.shape, "mlp grad fc1 weight");
  check_shape(db1, fc1.b.shape, "mlp grad fc1 bias");
  check_shape(dw2, fc2.w.shape, "mlp grad fc2 weight");
  if (db2) check_shape(*db2, fc2.b.shape, "mlp grad fc2 bias");
  switch (common_device({&dx, &dy, &x, &fc1.w, &fc2.w}, "mlp_backward")) {
    case Device::CPU:
      return cpu::mlp_backward(dx.data, dact.data, dw1.data, db1.data, dw2.data, db2 ? db2->data : nullptr,
                               dy.data, x.data, cpu_operand(fc1), cpu_operand(fc2), cpu_buffers(a), x.dim(0),
                               drop.p, drop.key, drop.first);
    default: unsupported("mlp_backward", dy.device);
  }
}

}  // namespace vit::ops
