// Image folders, ImageNet style: ROOT/<class>/*.{png,jpg,jpeg} (any case), and in subfolders of
// a class folder, as torchvision's ImageFolder takes them. Classes are the sorted subfolder
// names; files are in ImageFolder's order (by folder, then name), so indices are stable and
// the same as torchvision's. Images are decoded
// when asked for (by the batch-loading threads) and preprocessed as data/preprocess.h says
// (Pillow's resampling, timm's center crop, the model's mean and std). A file that does not
// decode stops the run with its name, unless skip_bad is set: then every file is decoded
// once up front and those that fail are left out (skipped() lists them with the reason).
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/preprocess.h"

namespace vit {

// Whether a file is an image an image folder is read for: .png, .jpg or .jpeg, in any case.
bool is_image_file(const std::string& path);

// The sorted names of root's subfolders (the classes), without listing their files.
std::vector<std::string> class_folders(const std::string& root);
// Names in timm's order for its image folders' classes (timm.data.readers' natural_key): case
// left out, runs of digits compared as numbers ("class2" before "class10"); equal keys in
// byte order.
std::vector<std::string> natural_sorted(std::vector<std::string> names);
// The classes' numbering for a note, "a -> 0, b -> 1, ...": the first five, then any folder
// named as a number that is not its class's ("9 -> 8", where a folder 8 is missing).
std::string class_numbering(const std::vector<std::string>& names);

class FolderDataset : public Dataset {
 public:
  // class_names: use these (e.g. the training split's) instead of the subfolders' own,
  // so that a validation folder missing a class keeps the training indices.
  FolderDataset(const std::string& root, InputSpec in, std::vector<std::string> class_names = {},
                bool skip_bad = false);
  int64_t size() const override { return int64_t(files_.size()); }
  int64_t num_classes() const override { return int64_t(classes_.size()); }
  int64_t channels() const override { return in_.channels; }
  int64_t height() const override { return in_.height; }
  int64_t width() const override { return in_.width; }
  int64_t get(int64_t i, float* image) const override;
  int64_t get_crop(int64_t i, const CropDraw& draw, float* image) const override;
  std::string describe() const override;
  std::string source(int64_t i) const override { return files_[size_t(i)].first; }
  const std::vector<std::string>& class_names() const { return classes_; }
  const std::vector<std::string>& skipped() const { return skipped_; }  // "path: reason"
  const std::string& root() const { return root_; }
  // Files of the other formats torchvision's ImageFolder takes (.bmp, .ppm, .pgm, .tif,
  // .tiff, .webp), left out: vitcpp decodes PNG and JPEG.
  int64_t other_formats() const { return other_formats_; }

 private:
  std::string root_;
  InputSpec in_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> files_;  // path, label
  std::vector<std::string> skipped_;
  int64_t other_formats_ = 0;
  void drop_undecodable();
  // Sample i's label, once produce(path) has written its image; errors say how to skip it.
  template <typename F>
  int64_t load(int64_t i, F&& produce) const;
};

}  // namespace vit
