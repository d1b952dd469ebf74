#include "vit/data/augment.h"

#include <cstring>
#include <vector>

#include "vit/core/rng.h"

namespace vit {

AugmentedDataset::AugmentedDataset(const Dataset& base, AugmentConfig cfg, uint64_t seed)
    : base_(base), cfg_(cfg), seed_(seed) {}

int64_t AugmentedDataset::get(int64_t i, float* image) const {
  const int64_t label = base_.get(i, image);
  const int64_t C = channels(), H = height(), W = width();
  Rng rng(rng_key(seed_, uint64_t(epoch_), uint64_t(i)));
  if (cfg_.crop_pad > 0) {
    const int64_t p = cfg_.crop_pad;
    // Offsets of the crop inside the padded image, in [0, 2p]; shift = offset - p.
    const int64_t dy = int64_t(rng.below(2 * p + 1)) - p, dx = int64_t(rng.below(2 * p + 1)) - p;
    thread_local std::vector<float> src;
    src.assign(image, image + C * H * W);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t sy = y + dy, sx = x + dx;
          image[(c * H + y) * W + x] =
              (sy >= 0 && sy < H && sx >= 0 && sx < W) ? src[(c * H + sy) * W + sx] : 0.f;
        }
  }
  if (cfg_.hflip > 0.f && rng.uniform() < cfg_.hflip)
    for (int64_t r = 0; r < C * H; ++r)
      for (int64_t x = 0; x < W / 2; ++x) std::swap(image[r * W + x], image[r * W + W - 1 - x]);
  return label;
}

std::string AugmentedDataset::describe() const {
  return base_.describe();
}

}  // namespace vit
