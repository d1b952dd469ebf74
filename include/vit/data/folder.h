// Image folders, ImageNet style: ROOT/<class>/*.{png,jpg,jpeg} (any case). Classes are the
// sorted subfolder names; files are sorted too, so indices are stable. Images are decoded
// when asked for (by the batch-loading threads), converted to the model's channels,
// resized to its input size (bilinear) and normalized with its mean and std.
#pragma once
#include <string>
#include <vector>

#include "vit/data/dataset.h"

namespace vit {

struct InputSpec {
  int64_t channels = 3, height = 224, width = 224;
  std::vector<float> mean, std;
  std::string interpolation = "bilinear";  // or "bicubic"
  // crop_pct < 1: resize the shorter side to size / crop_pct, then center-crop to the
  // input size (timm's eval transform). 1: resize straight to the input size.
  float crop_pct = 1.f;
};

// Decodes one image file into the model's input [C, H, W] (normalized): channels
// converted, resized (and center-cropped) as `in` says.
void load_image_input(const std::string& path, const InputSpec& in, float* out);

class FolderDataset : public Dataset {
 public:
  // class_names: use these (e.g. the training split's) instead of the subfolders' own,
  // so that a validation folder missing a class keeps the training indices.
  FolderDataset(const std::string& root, InputSpec in, std::vector<std::string> class_names = {});
  int64_t size() const override { return int64_t(files_.size()); }
  int64_t num_classes() const override { return int64_t(classes_.size()); }
  int64_t channels() const override { return in_.channels; }
  int64_t height() const override { return in_.height; }
  int64_t width() const override { return in_.width; }
  int64_t get(int64_t i, float* image) const override;
  std::string describe() const override;
  const std::vector<std::string>& class_names() const { return classes_; }

 private:
  std::string root_;
  InputSpec in_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> files_;  // path, label
};

}  // namespace vit
