// Mixup and CutMix on a batch, as timm's Mixup in 'batch' mode: each image is mixed with
// the batch's reversed order (x[b] with x[B-1-b]) and the targets become soft:
// lam * onehot(y) + (1 - lam) * onehot(y_flipped), label smoothing applied to both.
// Mixup blends whole images (lam ~ Beta(alpha, alpha)); CutMix pastes a box whose area
// is 1 - lam of the image (lam then corrected to the box that fits). With both on, each
// batch picks one with probability switch_prob for CutMix. Draws depend on (seed, step).
#pragma once
#include <cstdint>
#include <vector>

namespace vit {

struct MixupConfig {
  float mixup_alpha = 0.f, cutmix_alpha = 0.f;
  float prob = 1.f;          // chance that a batch is mixed at all
  float switch_prob = 0.5f;  // with both on: chance of CutMix
  bool active() const { return mixup_alpha > 0.f || cutmix_alpha > 0.f; }
};

// Mixes images[B,C,H,W] in place and writes targets[B,K]; returns the lam used (1: unmixed).
float mix_batch(const MixupConfig& cfg, float* images, const int64_t* labels, float* targets, int64_t B,
                int64_t C, int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step);

// The same mix for a shard of the batch (data-parallel training): rows [first, first+n)
// of a batch of B. images[n,C,H,W] are mixed in place with partners[n,C,H,W], the unmixed
// rows B-1-b for each row b (partner_labels their labels); targets[n,K]. Row for row the
// same bits as mix_batch on the whole batch. Returns the lam used.
float mix_shard(const MixupConfig& cfg, float* images, const float* partners, const int64_t* labels,
                const int64_t* partner_labels, float* targets, int64_t first, int64_t n, int64_t B, int64_t C,
                int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step);

// One draw of Beta(a, a) from the generator state (Marsaglia-Tsang gamma draws).
double sample_beta(uint64_t& state, double a);

}  // namespace vit
