#include "vit/data/image_set.h"

#include <numeric>

#include "vit/core/error.h"
#include "vit/data/image.h"

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
  const int64_t j = index_.at(i), H = set_->h, W = set_->w, C = in_.channels, OH = in_.height, OW = in_.width;
  const uint8_t* px = set_->pixels.data() + j * set_->c * H * W;
  const bool needs_resize = H != OH || W != OW;
  thread_local std::vector<float> planes;
  planes.resize(needs_resize ? C * H * W : 0);
  float* dst = needs_resize ? planes.data() : image;
  for (int64_t c = 0; c < C; ++c) {
    const uint8_t* src = px + (set_->c == 1 ? 0 : c) * H * W;
    for (int64_t k = 0; k < H * W; ++k) dst[c * H * W + k] = float(src[k]) * (1.f / 255.f);
  }
  if (needs_resize) resize(in_.interpolation, planes.data(), C, H, W, image, OH, OW);
  for (int64_t c = 0; c < C; ++c) {
    const float scale = 1.f / in_.std[c], shift = in_.mean[c];
    for (int64_t k = 0; k < OH * OW; ++k) image[c * OH * OW + k] = (image[c * OH * OW + k] - shift) * scale;
  }
  return set_->labels[j];
}

std::string NormalizedDataset::describe() const {
  return set_->source + " (" + std::to_string(size()) + " images, " + std::to_string(set_->c) + "x" +
         std::to_string(set_->h) + "x" + std::to_string(set_->w) + ", " + std::to_string(set_->num_classes) +
         " classes)";
}

}  // namespace vit
