#include "backends/cpu/cpu.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace vit::ops {

void im2col_patches(Tensor cols, const Tensor& images, int64_t ph, int64_t pw) {
  VIT_CHECK(images.ndim() == 4, "patch embed: images must be [B,C,H,W], got ", shape_str(images.shape));
  const int64_t B = images.dim(0), C = images.dim(1), H = images.dim(2), W = images.dim(3);
  // A size past a multiple of the patch: the last rows and columns are not read (Conv2d's floor).
  VIT_CHECK(H >= ph && W >= pw, "patch embed: image ", H, "x", W, " is smaller than one patch ", ph, "x", pw);
  check_shape(cols, {B * (H / ph) * (W / pw), C * ph * pw}, "patch columns");
  switch (common_device({&cols, &images}, "im2col_patches")) {
    case Device::CPU: return cpu::im2col_patches(cols.data, images.data, B, C, H, W, ph, pw);
    default: unsupported("im2col_patches", cols.device);
  }
}

namespace {
// Prefix tokens (class token, register tokens) and patches of a [B,T,C] token tensor.
struct TokenLayout {
  int64_t B, T, C, N, R;
  bool has_cls, pos_all;
};
TokenLayout token_layout(const Tensor& tokens, const Tensor* cls, const Tensor* reg, int64_t pos_rows,
                         const char* what) {
  VIT_CHECK(tokens.ndim() == 3, what, ": tokens must be [B,T,C], got ", shape_str(tokens.shape));
  TokenLayout L{tokens.dim(0), tokens.dim(1), tokens.dim(2), 0, reg ? reg->dim(1) : 0, cls != nullptr, true};
  L.N = L.T - L.R - (L.has_cls ? 1 : 0);
  VIT_CHECK(L.N > 0, what, ": ", L.T, " tokens leave no patches after the prefix tokens");
  if (cls) check_shape(*cls, {1, 1, L.C}, "cls_token");
  if (reg) check_shape(*reg, {1, L.R, L.C}, "reg_token");
  VIT_CHECK(pos_rows == L.T || pos_rows == L.N, what, ": pos_embed has ", pos_rows, " rows; want ", L.T,
            " (every token) or ", L.N, " (patches only)");
  L.pos_all = pos_rows == L.T;
  return L;
}
}  // namespace

void tokens_forward(Tensor tokens, const Tensor& pe, const Tensor* cls, const Tensor* reg,
                    const Tensor& pos) {
  VIT_CHECK(pos.ndim() == 3, "pos_embed must be [1,T,C], got ", shape_str(pos.shape));
  const TokenLayout L = token_layout(tokens, cls, reg, pos.dim(1), "tokens");
  check_shape(pe, {L.B * L.N, L.C}, "patch embeddings");
  check_shape(pos, {1, L.pos_all ? L.T : L.N, L.C}, "pos_embed");
  switch (common_device({&tokens, &pe, &pos}, "tokens")) {
    case Device::CPU:
      return cpu::tokens_forward(tokens.data, pe.data, cls ? cls->data : nullptr, reg ? reg->data : nullptr,
                                 pos.data, L.B, L.N, L.C, L.R, L.has_cls, L.pos_all);
    default: unsupported("tokens", tokens.device);
  }
}

void tokens_backward(Tensor dpe, Tensor* dcls, Tensor* dreg, Tensor* dpos, const Tensor& dtokens,
                     bool has_cls, int64_t reg_tokens, bool pos_all) {
  VIT_CHECK(dtokens.ndim() == 3, "tokens_backward: grad must be [B,T,C], got ", shape_str(dtokens.shape));
  const int64_t B = dtokens.dim(0), T = dtokens.dim(1), C = dtokens.dim(2);
  const int64_t N = T - reg_tokens - (has_cls ? 1 : 0);
  check_shape(dpe, {B * N, C}, "grad patch embeddings");
  if (dcls) check_shape(*dcls, {1, 1, C}, "grad cls_token");
  if (dreg) check_shape(*dreg, {1, reg_tokens, C}, "grad reg_token");
  if (dpos) check_shape(*dpos, {1, pos_all ? T : N, C}, "grad pos_embed");
  switch (common_device({&dpe, &dtokens}, "tokens_backward")) {
    case Device::CPU:
      return cpu::tokens_backward(dpe.data, dcls ? dcls->data : nullptr, dreg ? dreg->data : nullptr,
                                  dpos ? dpos->data : nullptr, dtokens.data, B, N, C, reg_tokens, has_cls,
                                  pos_all);
    default: unsupported("tokens_backward", dpe.device);
  }
}

}  // namespace vit::ops
