#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "vit/ops/ops.h"

namespace vit::ops {

void im2col_patches(Tensor cols, const Tensor& images, int64_t ph, int64_t pw) {
  VIT_CHECK(images.ndim() == 4, "patch embed: images must be [B,C,H,W], got ", shape_str(images.shape));
  const int64_t B = images.dim(0), C = images.dim(1), H = images.dim(2), W = images.dim(3);
  VIT_CHECK(H % ph == 0 && W % pw == 0, "patch embed: image ", H, "x", W, " is not divisible by patch ", ph,
            "x", pw);
  check_shape(cols, {B * (H / ph) * (W / pw), C * ph * pw}, "patch columns");
  switch (common_device({&cols, &images}, "im2col_patches")) {
    case Device::CPU: return cpu::im2col_patches(cols.data, images.data, B, C, H, W, ph, pw);
    default: unsupported("im2col_patches", cols.device);
  }
}

void tokens_forward(Tensor tokens, const Tensor& pe, const Tensor* cls, const Tensor& pos) {
  VIT_CHECK(tokens.ndim() == 3, "tokens must be [B,T,C], got ", shape_str(tokens.shape));
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = tokens.dim(2), N = T - (cls ? 1 : 0);
  check_shape(pe, {B * N, C}, "patch embeddings");
  check_shape(pos, {1, T, C}, "pos_embed");
  if (cls) check_shape(*cls, {1, 1, C}, "cls_token");
  switch (common_device({&tokens, &pe, &pos}, "tokens")) {
    case Device::CPU:
      return cpu::tokens_forward(tokens.data, pe.data, cls ? cls->data : nullptr, pos.data, B, N, C, cls);
    default: unsupported("tokens", tokens.device);
  }
}

void tokens_backward(Tensor dpe, Tensor* dcls, Tensor* dpos, const Tensor& dtokens) {
  const int64_t B = dtokens.dim(0), T = dtokens.dim(1), C = dtokens.dim(2);
  const int64_t N = dpe.dim(0) / B;
  const bool has_cls = T == N + 1;
  VIT_CHECK(has_cls || T == N, "tokens_backward: ", T, " tokens for ", N, " patches");
  check_shape(dpe, {B * N, C}, "grad patch embeddings");
  if (dcls) check_shape(*dcls, {1, 1, C}, "grad cls_token");
  if (dpos) check_shape(*dpos, {1, T, C}, "grad pos_embed");
  switch (common_device({&dpe, &dtokens}, "tokens_backward")) {
    case Device::CPU:
      return cpu::tokens_backward(dpe.data, dcls ? dcls->data : nullptr, dpos ? dpos->data : nullptr,
                                  dtokens.data, B, N, C, has_cls);
    default: unsupported("tokens_backward", dpe.device);
  }
}

}  // namespace vit::ops
