// How the model runs, apart from what it computes (vit.cpp): the class-token tail's plan per
// block, and the masks of a batch (the keys attention sees, the tokens pooling reads).
#include "core/settings.h"
#include "model/vit.h"

namespace vit {

ViT::BlockPlan ViT::plan(Acts& A, int64_t l, bool every_row) const {
  BlockActs& a = A.blocks[size_t(l) < A.blocks.size() ? l : 0];  // inference reuses one block's
  const bool cls_only = A.tail && !every_row && l + 1 == cfg_.depth;
  return {a, cls_only ? A.last : a, cls_only ? cfg_.head_tokens() : cfg_.num_tokens(), cls_only};
}

const uint8_t* ViT::pool_mask(const Acts& A) const {
  if (!A.have_mask) return nullptr;
  // [B, N] for the patches; [B, T] (prefix tokens visible) when the mean takes them too.
  return cfg_.pool_include_prefix ? A.key_mask.data() : A.patch_mask.data();
}

bool ViT::cls_tail_applies(const ViTConfig& cfg) {
  static const bool off = setting_choice("VIT_CLS_TAIL") == "off";
  return !off && cfg.class_token && cfg.global_pool == "token" && cfg.depth > 0;
}

bool ViT::use_cls_tail() const {
  return cls_tail_wanted_ && cls_tail_applies(cfg_);
}

void ViT::set_masks(Acts& A, const uint8_t* mask) const {
  A.have_mask = mask != nullptr;
  if (!mask) return;
  const int64_t B = A.B, N = cfg_.num_patches(), T = cfg_.num_tokens(), pre = cfg_.num_prefix_tokens();
  A.patch_mask.assign(mask, mask + B * N);
  A.key_mask.assign(B * T, 1);  // the class token is always visible
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n) A.key_mask[b * T + pre + n] = mask[b * N + n] ? 1 : 0;
}

}  // namespace vit
