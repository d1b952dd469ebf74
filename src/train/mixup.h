// Mixup and CutMix on a batch, as timm's Mixup: each image is mixed with its partner in the
// batch's reversed order (x[b] with x[B-1-b]) and the targets become soft:
// lam * onehot(y) + (1 - lam) * onehot(y_partner), label smoothing applied to both.
// Mixup blends whole images (lam ~ Beta(alpha, alpha)); CutMix pastes the partner's box whose
// area is 1 - lam of the image (lam then corrected to the box that fits), or with minmax a box
// whose sides are drawn in [min, max) of the image's. With both on, CutMix is picked with
// probability switch_prob. timm's modes: "batch" draws once for the batch, "pair" once for
// each pair (b, B-1-b), "elem" once for each image (each partner reads the other's unmixed
// image). Draws depend on (seed, step) and the pair's or image's row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

struct MixupConfig {
  float mixup_alpha = 0.f, cutmix_alpha = 0.f;
  float prob = 1.f;            // chance that a batch (pair, image) is mixed at all
  float switch_prob = 0.5f;    // with both on: chance of CutMix
  std::string mode = "batch";  // batch, pair or elem (timm's --mixup-mode)
  // CutMix's box sides as shares of the image's, drawn in [min, max) (timm's --cutmix-minmax,
  // which turns CutMix on with alpha 1 as timm does); empty: from lam.
  std::vector<double> cutmix_minmax;  // double: int(20 x 0.7) is 14, as in Python
  // Mixing stops from this epoch (0-based count of epochs done; timm's --mixup-off-epoch:
  // the targets are then the labels, smoothed); 0: never.
  int64_t off_epoch = 0;
  bool active() const { return mixup_alpha > 0.f || cutmix_alpha > 0.f || !cutmix_minmax.empty(); }
  bool active_in(int64_t epoch) const { return active() && (off_epoch <= 0 || epoch < off_epoch); }
  void validate() const;  // throws vit::ValueError naming the flag
};

// Mixes images[B,C,H,W] in place and writes targets[B,K]; returns row 0's lam (the batch's in
// batch mode; 1: unmixed).
float mix_batch(const MixupConfig& cfg, float* images, const int64_t* labels, float* targets, int64_t B,
                int64_t C, int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step);

// The same mix for a shard of the batch (data-parallel training): rows [first, first+n)
// of a batch of B. images[n,C,H,W] are mixed in place with partners[n,C,H,W], the unmixed
// rows B-1-b for each row b (partner_labels their labels); targets[n,K]. Row for row the
// same bits as mix_batch on the whole batch. Returns row first's lam.
float mix_shard(const MixupConfig& cfg, float* images, const float* partners, const int64_t* labels,
                const int64_t* partner_labels, float* targets, int64_t first, int64_t n, int64_t B, int64_t C,
                int64_t H, int64_t W, int64_t K, float smoothing, uint64_t seed, uint64_t step);

// One draw of Beta(a, a) from the generator state (Marsaglia-Tsang gamma draws).
double sample_beta(uint64_t& state, double a);

}  // namespace vit
