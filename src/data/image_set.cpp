#include "vit/data/image_set.h"

#include <numeric>

#include "vit/core/error.h"

namespace vit {

void ImageSet::check_labels() const {
  for (int64_t i = 0; i < n; ++i)
    VIT_CHECK(labels[i] >= 0 && labels[i] < num_classes, source, ": label ", labels[i], " of sample ", i,
              " is out of range for ", num_classes, " classes");
}

NormalizedDataset::NormalizedDataset(std::shared_ptr<const ImageSet> set, std::vector<float> mean,
                                     std::vector<float> std, std::vector<int64_t> indices)
    : set_(std::move(set)), index_(std::move(indices)) {
  VIT_CHECK(int64_t(mean.size()) == set_->c && int64_t(std.size()) == set_->c, set_->source, ": ", set_->c,
            " channels but ", mean.size(), " mean and ", std.size(), " std values");
  if (index_.empty()) {
    index_.resize(set_->n);
    std::iota(index_.begin(), index_.end(), 0);
  }
  for (int64_t c = 0; c < set_->c; ++c) {
    scale_.push_back(1.f / (255.f * std[c]));
    shift_.push_back(-mean[c] / std[c]);
  }
}

int64_t NormalizedDataset::get(int64_t i, float* image) const {
  const int64_t j = index_.at(i), plane = set_->h * set_->w;
  const uint8_t* px = set_->pixels.data() + j * set_->c * plane;
  for (int64_t c = 0; c < set_->c; ++c)
    for (int64_t k = 0; k < plane; ++k)
      image[c * plane + k] = float(px[c * plane + k]) * scale_[c] + shift_[c];
  return set_->labels[j];
}

std::string NormalizedDataset::describe() const {
  return set_->source + " (" + std::to_string(size()) + " images, " + std::to_string(set_->c) + "x" +
         std::to_string(set_->h) + "x" + std::to_string(set_->w) + ", " + std::to_string(set_->num_classes) +
         " classes)";
}

}  // namespace vit
