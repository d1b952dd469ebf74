// The model's parameters as named views: the fields the forward and backward read
// (W.blocks[l].qkvw, ...). Which table entry fills which field is said once, in the
// parameter table (params.cpp): each entry carries its Slot, and bind_weights fills the
// fields from the table alone.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace vit {

// Absent tensors (no qkv bias, no LayerScale, ...) are views with a null data pointer.
struct BlockWeights {
  Tensor n1w, n1b, qkvw, qkvb, projw, projb, ls1, n2w, n2b, fc1w, fc1b, fc2w, fc2b, ls2;
};
// The attention pool (map_pool): timm's attn_pool.* (latent, q, kv, proj, norm, mlp.fc1, mlp.fc2).
struct PoolWeights {
  Tensor latent, qw, qb, kvw, kvb, projw, projb, nw, nb, fc1w, fc1b, fc2w, fc2b;
};
struct Weights {
  // reg: the register tokens, or DeiT's distillation token, which sits where the first
  // register token would (after the class token, its own pos_embed row).
  Tensor patch_w, patch_b, cls, reg, pos, pre_w, pre_b, norm_w, norm_b, head_w, head_b;
  Tensor head_dist_w, head_dist_b;      // the distilled head (head_dist)
  Tensor pin_w, pin_b, pout_w, pout_b;  // patch_norm's two LayerNorms
  std::vector<BlockWeights> blocks;
  PoolWeights pool;
};

// Where a table entry is bound: a field of Weights, of block `block`'s BlockWeights, or of
// the attention pool's PoolWeights (exactly one of the three pointers is set).
struct Slot {
  Tensor Weights::*model = nullptr;
  Tensor BlockWeights::*in_block = nullptr;
  Tensor PoolWeights::*pool = nullptr;
  int64_t block = -1;
  Tensor& in(Weights& w) const {
    return model ? w.*model : in_block ? w.blocks[size_t(block)].*in_block : w.pool.*pool;
  }
};

}  // namespace vit
