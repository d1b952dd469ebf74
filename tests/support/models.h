// Small model configurations shared by the tests: each names the sizes a test relies on, so
// that a test asks for "the tiny model at 40 dims" rather than writing a config field by field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

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

// The same model at other widths (the sizes that choose the products' kernels and panels):
// embed_dim dims in num_heads heads, an MLP of mlp_dim hidden units.
inline ViTConfig with_width(ViTConfig c, int64_t embed_dim, int64_t num_heads, int64_t mlp_dim) {
  c.embed_dim = embed_dim;
  c.num_heads = num_heads;
  c.mlp_dim = mlp_dim;
  return c;
}

// The same model on square images in square patches (the height's), as Hugging Face's ViT
// needs: tiny_vit's 8 x 12 images become 8 x 8, its 4 x 6 patches 4 x 4.
inline ViTConfig square(ViTConfig c) {
  c.img_w = c.img_h;
  c.patch_w = c.patch_h;
  return c;
}

// The same model on images of `chans` channels (RGB: 3), each normalized by mean 0.5, std 0.5.
inline ViTConfig with_channels(ViTConfig c, int64_t chans) {
  c.in_chans = chans;
  c.mean = c.std = std::vector<float>(size_t(chans), 0.5f);
  return c;
}

// tiny_vit wide enough for the blocks' products to run in oneDNN: 16 x 16 three-channel
// images in 4 x 4 patches (16 patches + the class token), 48 dims in 3 heads, mlp 96.
inline ViTConfig wide_tiny_vit() {
  ViTConfig c = with_channels(with_width(tiny_vit(), 48, 3, 96), 3);
  c.img_h = c.img_w = 16;
  c.patch_h = c.patch_w = 4;
  return c;
}

// 8 x 8 gray images in 4 x 4 patches (a 2 x 2 grid + the class token), 3 classes, the
// defaults' learned position embedding and token pooling, at the given widths and depth.
inline ViTConfig gray_vit(int64_t embed_dim, int64_t num_heads, int64_t mlp_dim, int64_t depth) {
  ViTConfig c;
  c.img_h = c.img_w = 8;
  c.in_chans = 1;
  c.patch_h = c.patch_w = 4;
  c.depth = depth;
  c.num_classes = 3;
  c.mean = c.std = {0.5f};
  return with_width(c, embed_dim, num_heads, mlp_dim);
}

// The mnist-seed preset (seed 001: 4 x 4 gray patches, 8 dims, 2 blocks) on img x img images
// with `classes` classes.
inline ViTConfig mnist_seed_at(int64_t img, int64_t classes) {
  ViTConfig c = preset("mnist-seed");
  c.img_h = c.img_w = img;
  c.num_classes = classes;
  return c;
}

}  // namespace vit::test
