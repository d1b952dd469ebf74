#include "data/image_set.h"

#include <numeric>

#include "core/check.h"
#include "data/image.h"
#include "data/preprocess.h"

namespace vit {

void ImageSet::check_labels() const {
  for (int64_t i = 0; i < n; ++i)
    VIT_CHECK(labels[i] >= 0 && labels[i] < num_classes, source, ": label ", labels[i], " of sample ", i,
              " is out of range for ", num_classes, " classes");
}

NormalizedDataset::NormalizedDataset(std::shared_ptr<const ImageSet> set, InputSpec in,
                                     std::vector<int64_t> indices)
    : set_(std::move(set)), in_(std::move(in)), index_(std::move(indices)) {
  VIT_CHECK(in_.channels == set_->c || (set_->c == 1 && in_.channels == 3), set_->source, ": ", set_->c,
            "-channel images cannot feed a ", in_.channels, "-channel model");
  VIT_CHECK(int64_t(in_.mean.size()) == in_.channels && int64_t(in_.std.size()) == in_.channels, set_->source,
            ": mean and std need one value per channel");
  if (index_.empty()) {
    index_.resize(set_->n);
    std::iota(index_.begin(), index_.end(), 0);
  }
}

int64_t NormalizedDataset::get(int64_t i, float* image) const {
  const int64_t j = index_.at(i), C = set_->c, plane = set_->h * set_->w;
  const uint8_t* px = set_->pixels.data() + j * C * plane;
  // Planar [C, H, W] to the interleaved image preprocessing takes (one buffer per thread).
  thread_local Image img;
  img.h = set_->h;
  img.w = set_->w;
  img.c = C;
  img.px.resize(C * plane);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < plane; ++k) img.px[k * C + c] = px[c * plane + k];
  preprocess_image(img, in_, image);
  return set_->labels[j];
}

std::string NormalizedDataset::describe() const {
  return set_->source + " (" + std::to_string(size()) + " images, " + std::to_string(set_->c) + "x" +
         std::to_string(set_->h) + "x" + std::to_string(set_->w) + ", " + std::to_string(set_->num_classes) +
         " classes)";
}

}  // namespace vit
