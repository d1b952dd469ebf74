// An in-memory set of 8-bit images [N, C, H, W] with labels, as the IDX and CIFAR readers
// produce, and its view as a Dataset normalized with per-channel mean and std:
// x = (pixel / 255 - mean[c]) / std[c], as torchvision's ToTensor + Normalize.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/folder.h"

namespace vit {

struct ImageSet {
  std::string source;  // file(s) it came from, for messages
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t num_classes = 0;
  std::vector<uint8_t> pixels;  // [n, c, h, w]
  std::vector<int64_t> labels;  // [n]
  std::vector<std::string> class_names;
  // Throws unless every label is in [0, num_classes).
  void check_labels() const;
};

// Samples are produced at the model's input by data/preprocess.h (one channel replicated
// to three if the model wants RGB, Pillow's resize when the sizes differ, normalized).
class NormalizedDataset : public Dataset {
 public:
  // Takes shared ownership so splits of one set share its memory.
  NormalizedDataset(std::shared_ptr<const ImageSet> set, InputSpec in, std::vector<int64_t> indices = {});
  int64_t size() const override { return int64_t(index_.size()); }
  int64_t num_classes() const override { return set_->num_classes; }
  int64_t channels() const override { return in_.channels; }
  int64_t height() const override { return in_.height; }
  int64_t width() const override { return in_.width; }
  int64_t get(int64_t i, float* image) const override;
  std::string describe() const override;
  const ImageSet& images() const { return *set_; }

 private:
  std::shared_ptr<const ImageSet> set_;
  InputSpec in_;
  std::vector<int64_t> index_;
};

}  // namespace vit
