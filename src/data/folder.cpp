#include "vit/data/folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "vit/core/error.h"
#include "vit/data/image.h"

namespace vit {

namespace fs = std::filesystem;

void load_image_input(const std::string& path, const InputSpec& in, float* out) {
  const Image img = convert_channels(read_image(path), in.channels);
  const int64_t C = in.channels, plane = img.h * img.w;
  thread_local std::vector<float> planes;
  planes.resize(C * plane);
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < C; ++c) planes[c * plane + i] = float(img.px[i * C + c]) * (1.f / 255.f);
  if (in.crop_pct < 1.f) {
    // Shorter side to floor(size / crop_pct) keeping the aspect, then the center crop.
    const double scale_to = std::floor(double(std::min(in.height, in.width)) / in.crop_pct);
    const double f = scale_to / double(std::min(img.h, img.w));
    const int64_t rh = std::max<int64_t>(in.height, std::llround(img.h * f));
    const int64_t rw = std::max<int64_t>(in.width, std::llround(img.w * f));
    thread_local std::vector<float> big;
    big.resize(C * rh * rw);
    resize(in.interpolation, planes.data(), C, img.h, img.w, big.data(), rh, rw);
    const int64_t top = (rh - in.height) / 2, left = (rw - in.width) / 2;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < in.height; ++y)
        std::copy_n(big.data() + (c * rh + top + y) * rw + left, in.width,
                    out + (c * in.height + y) * in.width);
  } else if (img.h == in.height && img.w == in.width) {
    std::copy(planes.begin(), planes.end(), out);
  } else {
    resize(in.interpolation, planes.data(), C, img.h, img.w, out, in.height, in.width);
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < in.height * in.width; ++i)
      out[c * in.height * in.width + i] = (out[c * in.height * in.width + i] - in.mean[c]) / in.std[c];
}

namespace {
bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}
}  // namespace

FolderDataset::FolderDataset(const std::string& root, InputSpec in, std::vector<std::string> class_names)
    : root_(root), in_(std::move(in)), classes_(std::move(class_names)) {
  VIT_CHECK(fs::is_directory(root), root, ": not a directory");
  VIT_CHECK(int64_t(in_.mean.size()) == in_.channels && int64_t(in_.std.size()) == in_.channels, root,
            ": mean and std need one value per channel");
  std::vector<std::string> found;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory()) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  VIT_CHECK(!found.empty(), root, ": no class folders (expected ", root, "/<class>/*.png|jpg)");
  if (classes_.empty()) classes_ = found;
  for (auto& name : found) {
    auto it = std::find(classes_.begin(), classes_.end(), name);
    VIT_CHECK(it != classes_.end(), root, "/", name, ": a class the training split does not have");
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(fs::path(root) / name))
      if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
    VIT_CHECK(!files.empty(), root, "/", name, ": empty class folder (no .png, .jpg or .jpeg files)");
    std::sort(files.begin(), files.end());
    for (auto& f : files) files_.push_back({f, int64_t(it - classes_.begin())});
  }
}

int64_t FolderDataset::get(int64_t i, float* image) const {
  const auto& [path, label] = files_.at(i);
  load_image_input(path, in_, image);
  return label;
}

std::string FolderDataset::describe() const {
  return root_ + " (" + std::to_string(size()) + " images in " + std::to_string(classes_.size()) +
         " classes, as " + std::to_string(in_.channels) + "x" + std::to_string(in_.height) + "x" +
         std::to_string(in_.width) + ")";
}

}  // namespace vit
