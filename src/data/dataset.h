// The dataset interface every reader implements: indexed samples, already normalized to
// the model's input (float [C,H,W]), with an integer label.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/image.h"

namespace vit {

// Picks a box on an image of h x w pixels.
using CropDraw = std::function<CropBox(int64_t h, int64_t w)>;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t num_classes() const = 0;
  virtual int64_t channels() const = 0;
  virtual int64_t height() const = 0;
  virtual int64_t width() const = 0;
  // Writes sample i into image[C*H*W] and returns its label.
  virtual int64_t get(int64_t i, float* image) const = 0;
  // Writes sample i as the box `draw` picks on its source image at that image's own size,
  // resized to the sample's size: a random resized crop of the decoded file, as
  // torchvision's RandomResizedCrop takes it. Returns the label, or -1 where the samples are
  // all there is (the crop is then drawn on the sample).
  virtual int64_t get_crop(int64_t, const CropDraw&, float*) const { return -1; }
  virtual std::string describe() const = 0;
  // Where sample i came from, for a person to find it (an image folder's file), or "".
  virtual std::string source(int64_t) const { return ""; }
};

// A permutation of [0, n) from the seed and epoch (Fisher-Yates on core/rng.h's Rng).
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

// timm's RepeatAugSampler (DeiT's repeated augmentation) for an epoch of n images shown
// `repeats` times each: epoch_order(n)'s indices i, each followed by its repeats i + n,
// i + 2n, ... (a dataset of repeats x n samples, AugmentedDataset's with repeats, draws each
// one's augmentation apart), cut to repeated_epoch_size(n) samples, as the sampler's
// selected_round of 256 cuts it for one process; with R processes timm cuts each rank's
// share, R x floor(n // 256 * 256 / R), the same for R dividing 256.
int64_t repeated_epoch_size(int64_t n);  // n // 256 * 256
std::vector<int64_t> repeated_epoch_order(int64_t n, int64_t repeats, uint64_t seed, int64_t epoch);

}  // namespace vit
