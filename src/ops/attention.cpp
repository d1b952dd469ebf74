#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

namespace {
struct Dims {
  int64_t B, T, C, H, Q;  // Q: the query rows (T, or the first Q alone)
};
// cls_only: probs holds the first Q rows alone ([B,H,Q,T], attention_cls_*).
Dims attention_dims(const Tensor& qkv, const Tensor& probs, bool cls_only = false) {
  VIT_CHECK(qkv.ndim() == 3 && qkv.dim(2) % 3 == 0, "attention: qkv must be [B,T,3C], got ",
            shape_str(qkv.shape));
  VIT_CHECK(probs.ndim() == 4, "attention: probs must be [B,H,", cls_only ? "Q" : "T", ",T], got ",
            shape_str(probs.shape));
  Dims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, probs.dim(1), cls_only ? probs.dim(2) : qkv.dim(1)};
  VIT_CHECK(d.H > 0 && d.C % d.H == 0, "attention: ", d.H, " heads do not divide ", d.C, " channels");
  VIT_CHECK(d.Q >= 1 && d.Q <= d.T, "attention: ", d.Q, " query rows of ", d.T);
  check_shape(probs, {d.B, d.H, d.Q, d.T}, "attention probs");
  return d;
}

// The full op (every query row) or the class token's row alone (cls): the same arguments,
// kernels of the same signature.
void forward(bool cls, Tensor out, Tensor probs, Tensor* probs_drop, const Tensor& qkv,
             const uint8_t* key_mask, float drop_p, uint64_t drop_key, int64_t first_sample) {
  const Dims d = attention_dims(qkv, probs, cls);
  check_shape(out, {d.B, d.Q, d.C}, cls ? "attention (class token) output" : "attention output");
  VIT_CHECK(drop_p <= 0.f || (probs_drop && probs.data),
            "attention: dropout needs probs and a probs_drop buffer");
  if (probs_drop) check_shape(*probs_drop, probs.shape, "attention dropped probs");
  switch (common_device({&out, &probs, &qkv}, "attention")) {
    case Device::CPU:
      if (cls)
        return cpu::attention_cls_forward(out.data, probs.data, drop_p > 0.f ? probs_drop->data : nullptr,
                                          qkv.data, key_mask, d.B, d.T, d.C, d.H, drop_p, drop_key,
                                          first_sample, d.Q);
      return cpu::attention_forward(out.data, probs.data, drop_p > 0.f ? probs_drop->data : nullptr, qkv.data,
                                    key_mask, d.B, d.T, d.C, d.H, drop_p, drop_key, first_sample);
    default: unsupported("attention", out.device);
  }
}

void backward(bool cls, Tensor dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
              const Tensor* probs_drop, float drop_p, uint64_t drop_key, int64_t first_sample) {
  const Dims d = attention_dims(qkv, probs, cls);
  check_shape(dqkv, qkv.shape, "attention grad qkv");
  check_shape(dout, {d.B, d.Q, d.C}, cls ? "attention (class token) grad output" : "attention grad output");
  switch (common_device({&dqkv, &dout, &qkv, &probs}, "attention_backward")) {
    case Device::CPU:
      if (cls)
        return cpu::attention_cls_backward(dqkv.data, dout.data, qkv.data, probs.data,
                                           drop_p > 0.f ? probs_drop->data : nullptr, d.B, d.T, d.C, d.H,
                                           drop_p, drop_key, first_sample, d.Q);
      return cpu::attention_backward(dqkv.data, dout.data, qkv.data, probs.data,
                                     drop_p > 0.f ? probs_drop->data : nullptr, d.B, d.T, d.C, d.H, drop_p,
                                     drop_key, first_sample);
    default: unsupported("attention_backward", dqkv.device);
  }
}
}  // namespace

void attention_forward(Tensor out, Tensor probs, Tensor* probs_drop, const Tensor& qkv,
                       const uint8_t* key_mask, float drop_p, uint64_t drop_key, int64_t first_sample) {
  forward(false, out, probs, probs_drop, qkv, key_mask, drop_p, drop_key, first_sample);
}

void attention_backward(Tensor dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                        const Tensor* probs_drop, float drop_p, uint64_t drop_key, int64_t first_sample) {
  backward(false, dqkv, dout, qkv, probs, probs_drop, drop_p, drop_key, first_sample);
}

void attention_cls_forward(Tensor out, Tensor probs, Tensor* probs_drop, const Tensor& qkv,
                           const uint8_t* key_mask, float drop_p, uint64_t drop_key, int64_t first_sample) {
  forward(true, out, probs, probs_drop, qkv, key_mask, drop_p, drop_key, first_sample);
}

void attention_cls_backward(Tensor dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                            const Tensor* probs_drop, float drop_p, uint64_t drop_key, int64_t first_sample) {
  backward(true, dqkv, dout, qkv, probs, probs_drop, drop_p, drop_key, first_sample);
}

namespace {
// Dims of the pool: d.T is kv's rows per sample; the keys are the T - first after `first`.
Dims pool_dims(const Tensor& q, const Tensor& kv, const Tensor& probs, int64_t first) {
  VIT_CHECK(kv.ndim() == 3 && kv.dim(2) % 2 == 0, "attention pool: kv must be [B,T,2C], got ",
            shape_str(kv.shape));
  VIT_CHECK(probs.ndim() == 4, "attention pool: probs must be [B,H,L,T], got ", shape_str(probs.shape));
  const Dims d{kv.dim(0), kv.dim(1), kv.dim(2) / 2, probs.dim(1), probs.dim(2)};
  VIT_CHECK(first >= 0 && first < d.T, "attention pool: first key ", first, " of ", d.T, " tokens");
  VIT_CHECK(d.H > 0 && d.C % d.H == 0, "attention pool: ", d.H, " heads do not divide ", d.C, " channels");
  check_shape(q, {d.Q, d.C}, "attention pool queries");
  check_shape(probs, {d.B, d.H, d.Q, d.T - first}, "attention pool probs");
  return d;
}
}  // namespace

void attention_pool_forward(Tensor out, Tensor probs, const Tensor& q, const Tensor& kv,
                            const uint8_t* key_mask, int64_t first) {
  const Dims d = pool_dims(q, kv, probs, first);
  check_shape(out, {d.B, d.Q, d.C}, "attention pool output");
  switch (common_device({&out, &q, &kv}, "attention_pool")) {
    case Device::CPU:
      return cpu::attention_pool_forward(out.data, probs.data, q.data, kv.data, key_mask, d.B, d.T, d.C, d.H,
                                         d.Q, first);
    default: unsupported("attention_pool", out.device);
  }
}

void attention_pool_backward(Tensor dq, Tensor dkv, const Tensor& dout, const Tensor& q, const Tensor& kv,
                             const Tensor& probs, int64_t first) {
  const Dims d = pool_dims(q, kv, probs, first);
  VIT_CHECK(probs.data, "attention pool backward: the forward kept no probabilities");
  check_shape(dq, {d.B, d.Q, d.C}, "attention pool grad queries");
  check_shape(dkv, kv.shape, "attention pool grad kv");
  check_shape(dout, {d.B, d.Q, d.C}, "attention pool grad output");
  switch (common_device({&dq, &dkv, &dout, &q, &kv, &probs}, "attention_pool_backward")) {
    case Device::CPU:
      return cpu::attention_pool_backward(dq.data, dkv.data, dout.data, q.data, kv.data, probs.data, d.B, d.T,
                                          d.C, d.H, d.Q, first);
    default: unsupported("attention_pool_backward", dq.device);
  }
}

}  // namespace vit::ops
