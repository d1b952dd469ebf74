#include "data/cifar.h"

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "core/file.h"

namespace vit {

namespace fs = std::filesystem;

namespace {
constexpr int64_t kPixels = 3 * 32 * 32;

// Appends the records of one file; label_bytes = 1 (CIFAR-10) or 2 (CIFAR-100).
void read_records(ImageSet& s, const std::string& path, int label_bytes, int label_index) {
  const auto b = read_file_bytes(path);
  const int64_t rec = label_bytes + kPixels;
  VIT_CHECK(!b.empty(), path, ": empty file");
  VIT_CHECK(int64_t(b.size()) % rec == 0, path, ": ", b.size(), " bytes is not a whole number of ", rec,
            "-byte records: truncated or not a CIFAR", label_bytes == 1 ? "-10" : "-100", " batch");
  const int64_t n = int64_t(b.size()) / rec;
  s.pixels.reserve(s.pixels.size() + n * kPixels);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = uint8_t(b[i * rec + label_index]);
    VIT_CHECK(label < s.num_classes, path, ": label ", label, " of record ", i, " is out of range for ",
              s.num_classes, " classes");
    s.labels.push_back(label);
    s.pixels.insert(s.pixels.end(), b.begin() + i * rec + label_bytes, b.begin() + (i + 1) * rec);
  }
  s.n += n;
}

// The class names the archive keeps beside its batches (CIFAR-100's fine_label_names.txt or
// coarse_label_names.txt, one per line), or none when the file is not there.
std::vector<std::string> names_beside(const std::string& batch, const char* file, int64_t classes) {
  const fs::path path = fs::path(batch).parent_path() / file;
  if (!fs::exists(path)) return {};
  const std::vector<std::string> names =
      read_lines(path.string(), "class names go into checkpoints and JSON as text");
  VIT_CHECK(int64_t(names.size()) == classes, path.string(), ": ", names.size(), " names for ", classes,
            " classes");
  return names;
}

ImageSet empty_set(const std::string& source, int64_t classes) {
  ImageSet s;
  s.source = source;
  s.c = 3;
  s.h = s.w = 32;
  s.num_classes = classes;
  return s;
}
}  // namespace

ImageSet read_cifar10(const std::vector<std::string>& files) {
  VIT_CHECK(!files.empty(), "CIFAR-10: no batch files given");
  ImageSet s = empty_set(fs::path(files[0]).parent_path().string(), 10);
  for (auto& f : files) read_records(s, f, 1, 0);
  s.class_names = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  return s;
}

ImageSet read_cifar100(const std::string& file, bool fine) {
  ImageSet s = empty_set(file, fine ? 100 : 20);
  read_records(s, file, 2, fine ? 1 : 0);
  s.class_names = names_beside(file, fine ? "fine_label_names.txt" : "coarse_label_names.txt", s.num_classes);
  return s;
}

std::vector<std::string> find_cifar10_files(const std::string& dir, bool train) {
  for (fs::path d : {fs::path(dir), fs::path(dir) / "cifar-10-batches-bin"}) {
    std::vector<std::string> out;
    if (train) {
      for (int i = 1; i <= 5; ++i)
        if (fs::exists(d / ("data_batch_" + std::to_string(i) + ".bin")))
          out.push_back((d / ("data_batch_" + std::to_string(i) + ".bin")).string());
    } else if (fs::exists(d / "test_batch.bin")) {
      out.push_back((d / "test_batch.bin").string());
    }
    if (!out.empty()) return out;
  }
  return {};
}

std::string find_cifar100_file(const std::string& dir, bool train) {
  for (fs::path d : {fs::path(dir), fs::path(dir) / "cifar-100-binary"})
    if (fs::exists(d / (train ? "train.bin" : "test.bin")))
      return (d / (train ? "train.bin" : "test.bin")).string();
  return "";
}

}  // namespace vit
