#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "core/file.h"

namespace vit {

namespace fs = std::filesystem;

std::vector<char> read_maybe_gzip(const std::string& path) {
  std::vector<char> raw = read_file_bytes(path);
  if (raw.size() < 2 || uint8_t(raw[0]) != 0x1f || uint8_t(raw[1]) != 0x8b) return raw;
  z_stream zs{};
  VIT_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, path, ": cannot start gzip decoding");
  std::vector<char> out(raw.size() * 4 + 1024);
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_in = uInt(raw.size());
  int rc;
  do {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + zs.total_out);
    zs.avail_out = uInt(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
  } while (rc == Z_OK);
  const size_t n = zs.total_out;
  inflateEnd(&zs);
  VIT_CHECK(rc == Z_STREAM_END, path, ": corrupt or truncated gzip data (zlib: ",
            rc == Z_BUF_ERROR ? "unexpected end of input" : (zs.msg ? zs.msg : "error"), ")");
  out.resize(n);
  return out;
}

namespace {
uint32_t be32(const std::vector<char>& b, size_t at) {
  return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) |
         (uint32_t(uint8_t(b[at + 2])) << 8) | uint32_t(uint8_t(b[at + 3]));
}
}  // namespace

ImageSet read_idx(const std::string& images_path, const std::string& labels_path, int64_t num_classes) {
  const auto img = read_maybe_gzip(images_path), lab = read_maybe_gzip(labels_path);
  VIT_CHECK(img.size() >= 16, images_path, ": too short for an IDX image header (", img.size(), " bytes)");
  VIT_CHECK(be32(img, 0) == 0x803, images_path, ": wrong magic number 0x", std::hex, be32(img, 0),
            " (IDX images have 0x803)");
  VIT_CHECK(lab.size() >= 8, labels_path, ": too short for an IDX label header (", lab.size(), " bytes)");
  VIT_CHECK(be32(lab, 0) == 0x801, labels_path, ": wrong magic number 0x", std::hex, be32(lab, 0),
            " (IDX labels have 0x801)");
  ImageSet s;
  s.source = images_path;
  s.n = be32(img, 4);
  s.c = 1;
  s.h = be32(img, 8);
  s.w = be32(img, 12);
  // Bounded first, so that n * h * w cannot overflow below.
  VIT_CHECK(s.h > 0 && s.w > 0 && s.h <= 32768 && s.w <= 32768, images_path, ": implausible image size ", s.h,
            "x", s.w);
  const uint64_t want = 16 + uint64_t(s.n) * uint64_t(s.h) * uint64_t(s.w);
  VIT_CHECK(img.size() >= want, images_path, ": truncated: ", s.n, " images of ", s.h, "x", s.w, " need ",
            want, " bytes, the file has ", img.size());
  VIT_CHECK(int64_t(be32(lab, 4)) == s.n, labels_path, ": ", be32(lab, 4), " labels for ", s.n, " images in ",
            images_path);
  VIT_CHECK(lab.size() >= 8 + size_t(s.n), labels_path, ": truncated: ", s.n, " labels need ", 8 + s.n,
            " bytes, the file has ", lab.size());
  // Bytes past the count (torchvision's reader refuses them too): a header whose count was
  // edited, or two files joined; training on the first part alone would lose the rest unseen.
  auto bytes = [](uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); };
  VIT_CHECK(img.size() == want, images_path, ": ", bytes(img.size() - want), " past its ", s.n, " images of ",
            s.h, "x", s.w, " (", want, " bytes): is the header's count wrong, or two files joined?");
  VIT_CHECK(lab.size() == 8 + size_t(s.n), labels_path, ": ", bytes(lab.size() - 8 - size_t(s.n)),
            " past its ", s.n, " labels: is the header's count wrong, or two files joined?");
  VIT_CHECK(s.n > 0, images_path, ": holds no images");
  s.pixels.assign(img.begin() + 16, img.begin() + 16 + (s.n * s.h * s.w));
  s.labels.resize(s.n);
  for (int64_t i = 0; i < s.n; ++i) s.labels[i] = uint8_t(lab[8 + i]);
  s.num_classes = num_classes > 0
                      ? num_classes
                      : std::max<int64_t>(10, *std::max_element(s.labels.begin(), s.labels.end()) + 1);
  for (int64_t i = 0; i < s.n; ++i)
    VIT_CHECK(s.labels[i] < s.num_classes, labels_path, ": label ", s.labels[i], " of sample ", i,
              " is out of range for ", s.num_classes, " classes");
  return s;
}

std::pair<std::string, std::string> find_idx_files(const std::string& dir, bool train) {
  const std::string pre = train ? "train" : "t10k";
  auto find = [&](const fs::path& d, const std::string& kind) -> std::string {
    for (const char* sep : {"-", "."})
      for (const char* ext : {"", ".gz"}) {
        fs::path p = d / (pre + "-" + kind + sep + (kind == "images" ? "idx3" : "idx1") + "-ubyte" + ext);
        if (fs::exists(p)) return p.string();
      }
    return "";
  };
  auto both = [&](const fs::path& d) { return std::make_pair(find(d, "images"), find(d, "labels")); };
  if (auto files = both(dir); !files.first.empty() || !files.second.empty()) return files;
  // Where torchvision's MNIST, FashionMNIST and KMNIST (root=dir) keep their downloads.
  std::pair<std::string, std::string> found;
  std::string from;
  for (const char* sub : {"MNIST/raw", "FashionMNIST/raw", "KMNIST/raw"}) {
    auto files = both(fs::path(dir) / sub);
    if (files.first.empty() && files.second.empty()) continue;
    VIT_CHECK(from.empty(), dir, ": holds torchvision's ", from, " and ", sub,
              ": give the one to read as --data-dir (", (fs::path(dir) / from).string(), ")");
    found = files;
    from = sub;
  }
  return found;
}

}  // namespace vit
