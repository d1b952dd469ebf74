#include "vit/data/folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "vit/core/error.h"
#include "vit/data/image.h"
#include "vit/data/preprocess.h"

namespace vit {

namespace fs = std::filesystem;

namespace {
bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}
}  // namespace

std::vector<std::string> class_folders(const std::string& root) {
  VIT_CHECK(fs::is_directory(root), root, ": not a directory");
  std::vector<std::string> found;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory()) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  VIT_CHECK(!found.empty(), root, ": no class folders (expected ", root, "/<class>/*.png|jpg)");
  return found;
}

FolderDataset::FolderDataset(const std::string& root, InputSpec in, std::vector<std::string> class_names,
                             bool skip_bad)
    : root_(root), in_(std::move(in)), classes_(std::move(class_names)) {
  VIT_CHECK(fs::is_directory(root), root, ": not a directory");
  VIT_CHECK(int64_t(in_.mean.size()) == in_.channels && int64_t(in_.std.size()) == in_.channels, root,
            ": mean and std need one value per channel");
  const std::vector<std::string> found = class_folders(root);
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
  if (skip_bad) drop_undecodable();
  VIT_CHECK(!files_.empty(), root, ": no image decodes (", skipped_.size(), " skipped)");
}

void FolderDataset::drop_undecodable() {
  const int64_t n = int64_t(files_.size()), pixels = in_.channels * in_.height * in_.width;
  std::vector<std::string> error(size_t(n), "");
#pragma omp parallel
  {
    std::vector<float> scratch(static_cast<size_t>(pixels));
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      try {
        load_image_input(files_[size_t(i)].first, in_, scratch.data());
      } catch (const std::exception& e) {
        error[size_t(i)] = e.what();
      }
    }
  }
  std::vector<std::pair<std::string, int64_t>> kept;
  for (int64_t i = 0; i < n; ++i) {
    if (error[size_t(i)].empty())
      kept.push_back(std::move(files_[size_t(i)]));
    else
      skipped_.push_back(std::move(error[size_t(i)]));
  }
  files_ = std::move(kept);
}

int64_t FolderDataset::get(int64_t i, float* image) const {
  const auto& [path, label] = files_.at(size_t(i));
  try {
    load_image_input(path, in_, image);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (--skip-bad-images leaves such files out)");
  }
  return label;
}

std::string FolderDataset::describe() const {
  return root_ + " (" + std::to_string(size()) + " images in " + std::to_string(classes_.size()) +
         " classes, as " + std::to_string(in_.channels) + "x" + std::to_string(in_.height) + "x" +
         std::to_string(in_.width) + ")";
}

}  // namespace vit
