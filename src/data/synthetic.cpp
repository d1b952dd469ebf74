#include "data/synthetic.h"

#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace vit {

SyntheticDataset::SyntheticDataset(int64_t size, int64_t num_classes, int64_t channels, int64_t height,
                                   int64_t width, uint64_t seed, float noise, int64_t first_index)
    : size_(size),
      classes_(num_classes),
      c_(channels),
      h_(height),
      w_(width),
      seed_(seed),
      noise_(noise),
      first_(first_index) {
  VIT_CHECK(size > 0 && num_classes > 0 && channels > 0 && height > 0 && width > 0,
            "synthetic dataset: sizes must be positive");
  // Each class: a sum of a few random low-frequency waves per channel.
  templates_.resize(num_classes * channels * height * width);
  Rng rng(seed);
  for (int64_t k = 0; k < num_classes; ++k)
    for (int64_t c = 0; c < channels; ++c) {
      float* t = templates_.data() + (k * channels + c) * height * width;
      for (int wave = 0; wave < 3; ++wave) {
        const double fy = rng.uniform() * 3.0, fx = rng.uniform() * 3.0, ph = rng.uniform() * 6.283;
        for (int64_t y = 0; y < height; ++y)
          for (int64_t x = 0; x < width; ++x)
            t[y * width + x] += float(std::sin(6.283 * (fy * y / height + fx * x / width) + ph));
      }
    }
}

int64_t SyntheticDataset::get(int64_t i, float* image) const {
  VIT_CHECK(i >= 0 && i < size_, "synthetic dataset: index ", i, " out of range");
  Rng rng(mix64(seed_ * 0x100000001B3ull + uint64_t(first_ + i)));
  const int64_t label = int64_t(rng.below(uint64_t(classes_)));
  const float* t = templates_.data() + label * c_ * h_ * w_;
  for (int64_t j = 0; j < c_ * h_ * w_; ++j) image[j] = t[j] + noise_ * float(rng.normal());
  return label;
}

std::string SyntheticDataset::describe() const {
  return "synthetic(" + std::to_string(size_) + " samples, " + std::to_string(classes_) + " classes, " +
         std::to_string(c_) + "x" + std::to_string(h_) + "x" + std::to_string(w_) + ")";
}

}  // namespace vit
