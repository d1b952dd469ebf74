#include "data/folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <filesystem>

#include "core/check.h"
#include "core/file.h"
#include "core/utf8.h"
#include "data/image.h"
#include "data/preprocess.h"

namespace vit {

namespace fs = std::filesystem;

namespace {
std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext;
}

bool is_image(const std::string& ext) {
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The other extensions torchvision's ImageFolder takes (IMG_EXTENSIONS): formats vitcpp does
// not decode, counted so that the user hears of them.
bool is_other_image(const std::string& ext) {
  return ext == ".bmp" || ext == ".ppm" || ext == ".pgm" || ext == ".tif" || ext == ".tiff" || ext == ".webp";
}

// A class folder's images in torchvision's ImageFolder order: subfolders too (os.walk,
// following links), sorted by folder path, then by name within a folder. Files of the other
// formats ImageFolder takes are counted in *others.
std::vector<std::string> class_images(const fs::path& dir, int64_t* others) {
  std::vector<std::pair<std::string, std::string>> found;  // folder, name
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink);
       it != fs::recursive_directory_iterator(); ++it) {
    // A link to nowhere is listed as os.walk lists it, so that reading it fails by name (or is
    // counted by --skip-bad-images) rather than the image vanishing without a word.
    std::error_code ec;
    const bool dangling = it->is_symlink(ec) && !it->exists(ec);
    if (!it->is_regular_file(ec) && !dangling) continue;
    const std::string ext = lower_extension(it->path());
    if (is_image(ext))
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
    else if (is_other_image(ext))
      ++*others;
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (auto& [folder, name] : found) files.push_back((fs::path(folder) / name).string());
  return files;
}
}  // namespace

bool is_image_file(const std::string& path) {
  return is_image(lower_extension(path));
}

std::vector<std::string> class_folders(const std::string& root) {
  VIT_CHECK(fs::is_directory(root), root, ": not a directory");
  std::vector<std::string> found;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory()) {
      found.push_back(e.path().filename().string());
      VIT_CHECK(is_utf8(found.back()), e.path().string(),
                ": a class folder whose name is not UTF-8 text (a class name goes into checkpoints and "
                "JSON as text): rename it");
    }
  std::sort(found.begin(), found.end());
  VIT_CHECK(!found.empty(), root, ": no class folders (expected ", root, "/<class>/*.png|jpg)");
  return found;
}

namespace {
// timm's natural_key, re.split(r'(\d+)', name.lower()) with the digit runs as int: text and
// digit runs in turn, text first (maybe empty), so that two keys compare run by run. A digit
// run is kept without its leading zeros, so that shorter is smaller.
std::vector<std::string> natural_key(const std::string& name) {
  std::vector<std::string> key(1);
  for (char ch : name) {
    const bool digit = std::isdigit(static_cast<unsigned char>(ch)) != 0;
    if (digit != (key.size() % 2 == 0)) key.emplace_back();  // odd positions hold digits
    key.back() += digit ? ch : char(std::tolower(static_cast<unsigned char>(ch)));
  }
  for (size_t i = 1; i < key.size(); i += 2)
    key[i].erase(0, std::min(key[i].find_first_not_of('0'), key[i].size() - 1));
  return key;
}

bool natural_less(const std::string& a, const std::string& b) {
  const auto ka = natural_key(a), kb = natural_key(b);
  for (size_t i = 0; i < ka.size() && i < kb.size(); ++i) {
    if (i % 2 == 1 && ka[i].size() != kb[i].size()) return ka[i].size() < kb[i].size();
    if (ka[i] != kb[i]) return ka[i] < kb[i];
  }
  if (ka.size() != kb.size()) return ka.size() < kb.size();
  return a < b;  // equal keys (case alone differs): timm's order is the listing's; bytes here
}
}  // namespace

std::vector<std::string> natural_sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(), natural_less);
  return names;
}

std::string class_numbering(const std::vector<std::string>& names) {
  std::string order, later;
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string entry = names[k] + " -> " + std::to_string(k);
    if (k < 5)
      order += (k ? ", " : "") + entry;
    else if (names[k].find_first_not_of("0123456789") == std::string::npos && names[k] != std::to_string(k))
      later += ", " + entry;
  }
  return names.size() > 5 ? order + ", ..." + later : order;
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
    const int64_t others_before = other_formats_;
    const std::vector<std::string> files = class_images(fs::path(root) / name, &other_formats_);
    const int64_t others = other_formats_ - others_before;  // images vitcpp does not decode (BMP, WebP)
    VIT_CHECK(!files.empty(), root, "/", name, ": empty class folder (no .png, .jpg or .jpeg files",
              others > 0 ? detail::concat("; ", others,
                                          " image(s) of other formats, which vitcpp does not decode: "
                                          "convert them to PNG")
                         : std::string(),
              ")");
    for (auto& f : files) files_.push_back({f, int64_t(it - classes_.begin())});
  }
  if (skip_bad) drop_undecodable();
  VIT_CHECK(!files_.empty(), root, ": no image decodes (", skipped_.size(), " skipped)");
}

void FolderDataset::drop_undecodable() {
  const int64_t n = int64_t(files_.size()), pixels = in_.channels * in_.height * in_.width;
  std::vector<std::string> error(size_t(n), "");
  // Only what a file holds makes it bad: running short of descriptors or memory, or an I/O
  // error, stops the run (the first such, in order) rather than drop good images.
  std::vector<std::exception_ptr> fatal(static_cast<size_t>(n));
#pragma omp parallel
  {
    std::vector<float> scratch(static_cast<size_t>(pixels));
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      try {
        load_image_input(files_[size_t(i)].first, in_, scratch.data());
      } catch (const ResourceError&) {
        fatal[size_t(i)] = std::current_exception();
      } catch (const std::bad_alloc&) {
        fatal[size_t(i)] =
            std::make_exception_ptr(ResourceError(files_[size_t(i)].first + ": out of memory decoding it"));
      } catch (const std::exception& e) {
        error[size_t(i)] = e.what();
      }
    }
  }
  for (const std::exception_ptr& e : fatal)
    if (e) std::rethrow_exception(e);
  std::vector<std::pair<std::string, int64_t>> kept;
  for (int64_t i = 0; i < n; ++i) {
    if (error[size_t(i)].empty())
      kept.push_back(std::move(files_[size_t(i)]));
    else
      skipped_.push_back(std::move(error[size_t(i)]));
  }
  files_ = std::move(kept);
}

template <typename F>
int64_t FolderDataset::load(int64_t i, F&& produce) const {
  const auto& [path, label] = files_.at(size_t(i));
  try {
    produce(path);
  } catch (const ResourceError&) {
    throw;  // not the file's fault: skipping it would not help
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (--skip-bad-images leaves such files out)");
  }
  return label;
}

int64_t FolderDataset::get(int64_t i, float* image) const {
  return load(i, [&](const std::string& path) { load_image_input(path, in_, image); });
}

int64_t FolderDataset::get_crop(int64_t i, const CropDraw& draw, float* image) const {
  return load(i, [&](const std::string& path) {
    const Image img = read_image(path);
    try {
      preprocess_crop(img, draw(img.h, img.w), in_, image);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  });
}

std::string FolderDataset::describe() const {
  return root_ + " (" + std::to_string(size()) + " images in " + std::to_string(classes_.size()) +
         " classes, as " + std::to_string(in_.channels) + "x" + std::to_string(in_.height) + "x" +
         std::to_string(in_.width) + ")";
}

}  // namespace vit
