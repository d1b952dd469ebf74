// Attention maps from a ViT's attention probabilities (ViT::infer with an attn buffer):
//   cls:     one layer's heads averaged (or one head), the class token's row over the patch
//            columns (for avg-pooled models or no class token, the mean of the patch rows),
//            as seed 002 draws it;
//   dist:    the same for DeiT's distillation token (row 1);
//   rollout: Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers": per layer
//            the heads averaged, plus the identity (the residual path), rows renormalized,
//            multiplied through the layers (R = A_l ... A_1), then the same row as cls; with
//            the attention pool, the pool's row times R (where the pooled vector looks
//            through the blocks);
//   pool:    the attention pool's query (global_pool 'map', SigLIP's) over the patches, heads
//            averaged (or one head): what the pooled vector is the weighted mean of.
// Shapes: probs of one image and one layer [H, T, T]; a token matrix [T, T]; a patch map
// [grid_h, grid_w]; T = cfg.num_tokens().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace vit::viz {

// One layer's [H, T, T] probabilities -> [T, T]: head h, or the mean over heads (h < 0).
std::vector<float> head_attention(const float* probs, int64_t H, int64_t T, int64_t head);
// Rollout of layers [0, layers) of one image; probs points at layer 0 of [layers][H, T, T]
// laid out with `layer_stride` floats between layers. head < 0 averages the heads. [T, T].
std::vector<float> attention_rollout(const float* probs, int64_t layers, int64_t layer_stride, int64_t H,
                                     int64_t T, int64_t head);
// The row the model pools, over the patch columns: [grid_h * grid_w]; row_of_token 1 takes
// the distillation token's row instead of the class token's.
std::vector<float> patch_map(const std::vector<float>& tokens, const ViTConfig& cfg,
                             int64_t row_of_token = 0);
// A patch map resized bilinearly to [h, w] (half-pixel centers, as F.interpolate) and
// min-max normalized to [0, 1] (all zeros when the map is constant, or differs by less
// than 1e-5 of its largest value: float rounding, not attention). cover_h, cover_w: the
// share of the rows and columns the grid covers, from the top left (an input size past a
// multiple of the patch leaves its last pixels unread, as Conv2d does); the rest is 0.
std::vector<float> upsample_normalized(const std::vector<float>& map, int64_t gh, int64_t gw, int64_t h,
                                       int64_t w, double cover_h = 1, double cover_w = 1);

// The map of one method for image b of a batch: attn is [depth, B, H, T, T] as ViT::infer
// writes it. method "cls": block `layer`'s attention; "dist": the same, the distillation
// token's row (a model with dist_token); "rollout": blocks 0..layer rolled out; "pool": the
// attention pool's probabilities pool_attn [B, H, T] (ViT::infer's, a model with map_pool;
// rollout reads them too for such a model; layer unused). head < 0 averages the heads.
// Returns [grid_h * grid_w].
std::vector<float> attention_map(const float* attn, const ViTConfig& cfg, int64_t B, int64_t b,
                                 const std::string& method, int64_t layer, int64_t head,
                                 const float* pool_attn = nullptr);

}  // namespace vit::viz
