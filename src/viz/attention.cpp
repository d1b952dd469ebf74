#include "viz/attention.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "data/image.h"

namespace vit::viz {

std::vector<float> head_attention(const float* probs, int64_t H, int64_t T, int64_t head) {
  VIT_CHECK(head < H, "attention head ", head, " out of range: the model has ", H, " heads");
  std::vector<float> a(T * T, 0.f);
  if (head >= 0) {
    std::copy(probs + head * T * T, probs + (head + 1) * T * T, a.begin());
    return a;
  }
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T * T; ++i) a[i] += probs[h * T * T + i];
  for (auto& v : a) v /= float(H);
  return a;
}

std::vector<float> attention_rollout(const float* probs, int64_t layers, int64_t layer_stride, int64_t H,
                                     int64_t T, int64_t head) {
  // R starts as the identity; each layer: A' = rownorm(A + I), R = A' R. Accumulated in
  // double: 24 products of row-stochastic matrices stay row-stochastic to rounding.
  std::vector<double> R(T * T, 0.0), next(T * T);
  for (int64_t i = 0; i < T; ++i) R[i * T + i] = 1.0;
  for (int64_t l = 0; l < layers; ++l) {
    const std::vector<float> a = head_attention(probs + l * layer_stride, H, T, head);
    std::vector<double> ai(T * T);
    for (int64_t i = 0; i < T; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) sum += ai[i * T + j] = a[i * T + j] + (i == j ? 1.0 : 0.0);
      for (int64_t j = 0; j < T; ++j) ai[i * T + j] /= sum;
    }
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t k = 0; k < T; ++k)
        for (int64_t j = 0; j < T; ++j) next[i * T + j] += ai[i * T + k] * R[k * T + j];
    R.swap(next);
  }
  return std::vector<float>(R.begin(), R.end());
}

std::vector<float> patch_map(const std::vector<float>& tokens, const ViTConfig& cfg, int64_t row_of_token) {
  const int64_t T = cfg.num_tokens(), N = cfg.num_patches(), pre = cfg.num_prefix_tokens();
  VIT_CHECK(int64_t(tokens.size()) == T * T, "patch_map: want a [", T, ", ", T, "] token matrix");
  std::vector<float> map(N, 0.f);
  if (cfg.class_token && !cfg.avg_pool()) {  // row 0: the class token (1: the distillation token)
    for (int64_t n = 0; n < N; ++n) map[n] = tokens[row_of_token * T + pre + n];
    return map;
  }
  // Avg pooling: the pooled vector is the mean of the pooled tokens (the patches, or every
  // token with pool_include_prefix), so their rows' mean, over the patch columns.
  const int64_t first = cfg.first_pooled(), rows = T - first;
  for (int64_t r = first; r < T; ++r)
    for (int64_t n = 0; n < N; ++n) map[n] += tokens[r * T + pre + n] / float(rows);
  return map;
}

std::vector<float> upsample_normalized(const std::vector<float>& map, int64_t gh, int64_t gw, int64_t h,
                                       int64_t w, double cover_h, double cover_w) {
  VIT_CHECK(int64_t(map.size()) == gh * gw, "upsample: the map is not ", gh, "x", gw);
  const int64_t ch = std::clamp<int64_t>(std::lround(double(h) * cover_h), 1, h);
  const int64_t cw = std::clamp<int64_t>(std::lround(double(w) * cover_w), 1, w);
  std::vector<float> covered(ch * cw), out(h * w);
  resize_bilinear(map.data(), 1, gh, gw, covered.data(), ch, cw);
  const float low = *std::min_element(covered.begin(), covered.end());
  for (int64_t y = 0; y < h; ++y)  // the pixels the model did not read: the map's lowest
    for (int64_t x = 0; x < w; ++x) out[y * w + x] = y < ch && x < cw ? covered[y * cw + x] : low;
  // A map that differs only in float rounding (uniform attention summed in another order,
  // a one-patch grid's rollout) is flat: stretched to the full range its last bits drew
  // stripes. Differences under 1e-5 of the largest value count as none.
  const auto [mlo, mhi] = std::minmax_element(map.begin(), map.end());
  const bool flat = *mhi - *mlo <= 1e-5f * std::max(std::fabs(*mhi), std::fabs(*mlo));
  const auto [lo, hi] = std::minmax_element(out.begin(), out.end());
  const float min = *lo, range = *hi - *lo;
  for (auto& v : out) v = !flat && range > 0.f ? (v - min) / range : 0.f;
  return out;
}

namespace {
// The attention pool's row of image b over the tokens [T]: head `head`, or the heads' mean.
std::vector<float> pool_row(const float* pool_attn, const ViTConfig& cfg, int64_t b, int64_t head) {
  const int64_t H = cfg.num_heads, T = cfg.num_tokens();
  VIT_CHECK(head < H, "attention head ", head, " out of range: the model has ", H, " heads");
  const int64_t lo = head < 0 ? 0 : head, hi = head < 0 ? H : head + 1;  // the heads averaged
  std::vector<float> row(T, 0.f);
  for (int64_t h = lo; h < hi; ++h)
    for (int64_t t = 0; t < T; ++t) row[t] += pool_attn[(b * H + h) * T + t] / float(hi - lo);
  return row;
}
// The pool's row through a token matrix [T, T] (row . M), over the patch columns.
std::vector<float> pooled_patches(const std::vector<float>& row, const std::vector<float>& M,
                                  const ViTConfig& cfg) {
  const int64_t T = cfg.num_tokens(), N = cfg.num_patches(), pre = cfg.num_prefix_tokens();
  std::vector<float> map(N, 0.f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) map[n] += row[t] * M[t * T + pre + n];
  return map;
}
}  // namespace

std::vector<float> attention_map(const float* attn, const ViTConfig& cfg, int64_t B, int64_t b,
                                 const std::string& method, int64_t layer, int64_t head,
                                 const float* pool_attn) {
  const int64_t H = cfg.num_heads, T = cfg.num_tokens(), per_image = H * T * T;
  VIT_CHECK(method != "pool" || (cfg.map_pool() && pool_attn),
            "--method pool: the model has no attention pool (global_pool 'map', as SigLIP's)");
  if (method == "pool") {
    VIT_CHECK(b >= 0 && b < B, "attention_map: image ", b, " of a batch of ", B);
    const std::vector<float> row = pool_row(pool_attn, cfg, b, head);
    return std::vector<float>(row.begin() + cfg.num_prefix_tokens(), row.end());
  }
  VIT_CHECK(layer >= 0 && layer < cfg.depth, "block ", layer, " out of range: the model has ", cfg.depth,
            " blocks (0..", cfg.depth - 1, ")");
  VIT_CHECK(b >= 0 && b < B, "attention_map: image ", b, " of a batch of ", B);
  const float* first = attn + b * per_image;  // image b of block 0
  if (method == "cls") return patch_map(head_attention(first + layer * B * per_image, H, T, head), cfg);
  if (method == "dist") {
    VIT_CHECK(cfg.dist_token,
              "--method dist: the model has no distillation token (DeiT's distilled models do)");
    return patch_map(head_attention(first + layer * B * per_image, H, T, head), cfg, 1);
  }
  VIT_CHECK(method == "rollout", "unknown attention method '", method, "' (cls, dist, rollout or pool)");
  const std::vector<float> R = attention_rollout(first, layer + 1, B * per_image, H, T, head);
  if (cfg.map_pool() && pool_attn) return pooled_patches(pool_row(pool_attn, cfg, b, head), R, cfg);
  return patch_map(R, cfg);
}

}  // namespace vit::viz
