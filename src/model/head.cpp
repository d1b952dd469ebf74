// The classification head on the pooled features: timm's head, or DeiT's two heads (class
// and distillation tokens), forward and backward.
#include "core/check.h"
#include "model/vit.h"
#include "ops/ops.h"

namespace vit {

Tensor ViT::head_rows(const Tensor& t, int64_t k) const {
  const int64_t B = t.dim(0) / cfg_.head_tokens(), C = t.dim(1);
  return Tensor(t.data + k * B * C, {B, C});
}

void ViT::head_forward(Acts& A, const ForwardMode& mode) {
  if (!has_head()) return;
  if (!cfg_.head_dist) return ops::linear_forward(A.logits, A.pooled_ln, lin().head);
  // timm's VisionTransformerDistilled: (head(x_cls) + head_dist(x_dist)) / 2, or in
  // distillation training the two apart.
  const Tensor cls_ln = head_rows(A.pooled_ln, 0), dist_ln = head_rows(A.pooled_ln, 1);
  ops::linear_forward(A.logits, cls_ln, lin().head);
  ops::linear_forward(A.logits_dist, dist_ln, lin().head_dist);
  if (!mode.distill) ops::mean_of_two(A.logits, A.logits, A.logits_dist);
}

void ViT::head_backward(Acts& A, const Tensor& dlogits, const Tensor* ddist) {
  const int64_t B = A.B;
  VIT_CHECK(!ddist || cfg_.head_dist, "backward: a gradient for a distillation head the model does not have");
  if (cfg_.head_dist) {
    // Distilling, each head has its own gradient; else each head's logits count half.
    VIT_CHECK(distilling() == (ddist != nullptr),
              "backward: a distilling forward takes a gradient for each head, any other one");
    if (ddist) {
      check_shape(*ddist, {B, cfg_.num_classes}, "backward: grad distillation logits");
    } else {
      ops::copy(A.dlogits_half, dlogits);
      ops::scale(A.dlogits_half, 0.5f);
    }
    const Tensor& dy_cls = ddist ? dlogits : A.dlogits_half;
    const Tensor& dy_dist = ddist ? *ddist : A.dlogits_half;
    Tensor dcls = head_rows(A.dpooled_ln, 0), dd = head_rows(A.dpooled_ln, 1);
    ops::linear_backward(&dcls, &G_.head_w, &G_.head_b, dy_cls, head_rows(A.pooled_ln, 0), lin().head);
    ops::linear_backward(&dd, &G_.head_dist_w, &G_.head_dist_b, dy_dist, head_rows(A.pooled_ln, 1),
                         lin().head_dist);
  } else {
    ops::linear_backward(&A.dpooled_ln, &G_.head_w, &G_.head_b, dlogits, A.pooled_ln, lin().head);
  }
}

}  // namespace vit
