// Small model configurations shared by the model tests.
#pragma once
#include <string>

#include "vit/model/config.h"

namespace vit::test {

// 8 x 12 two-channel images in 4 x 6 patches (4 patches + the class token), 8 dims, 2 blocks
// of 2 heads, mlp 12, 3 classes: every op at a size the finite differences handle.
inline ViTConfig tiny_vit(const std::string& pool = "token", bool cls = true,
                          const std::string& pos = "learn") {
  ViTConfig c;
  c.img_h = 8;
  c.img_w = 12;
  c.in_chans = 2;
  c.patch_h = 4;
  c.patch_w = 6;
  c.embed_dim = 8;
  c.depth = 2;
  c.num_heads = 2;
  c.mlp_dim = 12;
  c.num_classes = 3;
  c.global_pool = pool;
  c.class_token = cls;
  c.pos_embed = pos;
  c.mean = c.std = {0.5f, 0.5f};
  return c;
}

}  // namespace vit::test
