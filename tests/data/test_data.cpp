// Data: IDX and CIFAR readers on files the test writes, their error messages, normalization,
// validation splits and augmentation.
#include <gtest/gtest.h>
#include <sched.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "core/check.h"
#include "core/threads.h"
#include "data/augment.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/open.h"
#include "data/pil_ops.h"
#include "data/prefetch.h"
#include "io/safetensors.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace vit {

namespace {
namespace fs = std::filesystem;
void put_be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xff));
}
void write(const std::string& path, const std::string& bytes, bool gz = false) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}
// n images of h x w with pixel (i, y, x) = i + y + x, labels i % classes.
void write_idx(const std::string& dir, const std::string& pre, int n, int h, int w, bool gz,
               int classes = 10) {
  std::string img, lab;
  put_be32(img, 0x803);
  put_be32(img, n);
  put_be32(img, h);
  put_be32(img, w);
  for (int i = 0; i < n; ++i)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) img.push_back(char(i + y + x));
  put_be32(lab, 0x801);
  put_be32(lab, n);
  for (int i = 0; i < n; ++i) lab.push_back(char(i % classes));
  const std::string ext = gz ? ".gz" : "";
  write(dir + "/" + pre + "-images-idx3-ubyte" + ext, img, gz);
  write(dir + "/" + pre + "-labels-idx1-ubyte" + ext, lab, gz);
}
}  // namespace

TEST(Idx, ReadsRawAndGzipAndNormalizes) {
  for (bool gz : {false, true}) {
    test::TempDir dir("idx");
    write_idx(dir.str(), "train", 12, 4, 5, gz);
    write_idx(dir.str(), "t10k", 3, 4, 5, gz);
    DatasetSplits d = open_dataset(dir.str());
    EXPECT_EQ(d.kind, "idx");
    ASSERT_EQ(d.train->n, 12);
    EXPECT_EQ(d.test->n, 3);
    EXPECT_EQ(d.train->labels[11], 1);
    NormalizedDataset nd(d.train, InputSpec{1, 4, 5, {0.5f}, {0.25f}});
    std::vector<float> img(20);
    EXPECT_EQ(nd.get(7, img.data()), 7);
    // pixel (7, 2, 3) = 12 -> (12/255 - 0.5) / 0.25
    EXPECT_NEAR(img[2 * 5 + 3], (12.f / 255.f - 0.5f) / 0.25f, 1e-6);
  }
}

// IDX files of more than 10 classes (EMNIST's balanced split: 47) are read with their classes,
// the same count for both splits; they were refused ("label 10 ... out of range for 10
// classes", whatever --num-classes said). MNIST's keep 10, whatever labels a split holds.
TEST(Idx, ClassesPastNineAreTheLargestLabelsPlusOne) {
  test::TempDir dir("idx47");
  write_idx(dir.str(), "train", 60, 4, 4, false, 47);
  write_idx(dir.str(), "t10k", 3, 4, 4, false, 47);
  DatasetSplits d = open_dataset(dir.str());
  EXPECT_EQ(d.train->num_classes, 47);
  EXPECT_EQ(d.test->num_classes, 47);
  EXPECT_EQ(d.train->labels[46], 46);
  test::TempDir small("idx3");
  write_idx(small.str(), "train", 6, 4, 4, false, 3);
  write_idx(small.str(), "t10k", 3, 4, 4, false, 3);
  EXPECT_EQ(open_dataset(small.str()).train->num_classes, 10);
  EXPECT_EQ(open_dataset(small.str(), "auto", Splits::eval).test->num_classes, 10);
}

// A torchvision root (datasets.MNIST(root, download=True) keeps root/MNIST/raw/) is read as
// it is; one holding two such datasets asks which. CIFAR's Python version (pickles, as
// torchvision downloads it) is named for what it is, not "no dataset found" alone.
TEST(Idx, TorchvisionsDownloadFoldersAreFound) {
  test::TempDir root("tvroot");
  fs::create_directories(root / "MNIST/raw");
  write_idx(root / "MNIST/raw", "train", 4, 3, 3, true);
  write_idx(root / "MNIST/raw", "t10k", 2, 3, 3, true);
  DatasetSplits d = open_dataset(root.str());
  EXPECT_EQ(d.kind, "idx");
  EXPECT_EQ(d.train->source, root / "MNIST/raw/train-images-idx3-ubyte.gz");
  fs::create_directories(root / "FashionMNIST/raw");
  write_idx(root / "FashionMNIST/raw", "train", 4, 3, 3, false);
  write_idx(root / "FashionMNIST/raw", "t10k", 2, 3, 3, false);
  EXPECT_NE(test::error_of([&] {
              open_dataset(root.str());
            }).find("holds torchvision's MNIST/raw and FashionMNIST/raw: give the one to read as --data-dir"),
            std::string::npos);
  EXPECT_EQ(open_dataset(root / "FashionMNIST/raw").train->n, 4);
  test::TempDir py("cifarpy");
  fs::create_directories(py / "cifar-10-batches-py");
  EXPECT_NE(test::error_of([&] { open_dataset(py.str()); }).find("this is CIFAR's Python version"),
            std::string::npos);
}

TEST(Idx, ErrorsNameTheFileAndTheProblem) {
  test::TempDir dir("idxbad");
  write_idx(dir.str(), "train", 4, 3, 3, false);
  write_idx(dir.str(), "t10k", 2, 3, 3, false);
  const std::string img = dir / "train-images-idx3-ubyte", lab = dir / "train-labels-idx1-ubyte";
  std::string bytes;
  {
    std::ifstream f(img, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  write(img, bytes.substr(0, bytes.size() - 5));
  EXPECT_NE(test::error_of([&] { read_idx(img, lab); }).find("truncated"), std::string::npos);
  // Bytes past the count: the rest of the file would be lost unseen (torchvision refuses too).
  write(img, bytes + "extra");
  EXPECT_NE(test::error_of([&] {
              read_idx(img, lab);
            }).find("5 bytes past its 4 images of 3x3 (52 bytes): is the header's count wrong"),
            std::string::npos)
      << test::error_of([&] { read_idx(img, lab); });
  write(img, bytes);
  {
    std::ifstream f(lab, std::ios::binary);
    const std::string labels((std::istreambuf_iterator<char>(f)), {});
    write(lab, labels + "x");
  }
  EXPECT_NE(test::error_of([&] { read_idx(img, lab); }).find("1 byte past its 4 labels"), std::string::npos);
  write_idx(dir.str(), "train", 4, 3, 3, false);
  std::string wrong = bytes;
  wrong[3] = 0x01;
  write(img, wrong);
  EXPECT_NE(test::error_of([&] { read_idx(img, lab); }).find("wrong magic number"), std::string::npos);
  write(img, bytes);
  EXPECT_NE(test::error_of([&] { read_idx(img, lab, 3); }).find("label 3 of sample 3 is out of range"),
            std::string::npos);
  write(img + ".gz", "\x1f\x8b garbage");
  EXPECT_NE(test::error_of([&] { read_idx(img + ".gz", lab); }).find("gzip"), std::string::npos);
  EXPECT_NE(test::error_of([&] { open_dataset(dir / "nope"); }).find("nope: no such directory"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { open_dataset(img); }).find("not a directory"), std::string::npos);
  EXPECT_NE(
      test::error_of([&] { open_dataset("~/nope"); }).find("the shell expands ~ only at a word's start"),
      std::string::npos);
  test::TempDir empty("empty");
  EXPECT_NE(test::error_of([&] { open_dataset(empty.str()); }).find("no dataset found"), std::string::npos);
}

// vit eval and vit samples read only the split they use: a directory with the test files
// alone serves them, in each format; asking for a missing split names it; the split not
// asked for is not read (a corrupt training file goes unnoticed by an evaluation).
TEST(Datasets, OneSplitIsReadAloneWhereOnlyItIsAskedFor) {
  test::TempDir idx("idxtest");
  write_idx(idx.str(), "t10k", 3, 4, 5, false);
  DatasetSplits d = open_dataset(idx.str(), "auto", Splits::eval);
  EXPECT_EQ(d.kind, "idx");
  ASSERT_TRUE(d.test);
  EXPECT_EQ(d.test->n, 3);
  EXPECT_FALSE(d.train);
  EXPECT_NE(test::error_of([&] { open_dataset(idx.str()); }).find(idx.str() + ": no IDX training files"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { open_dataset(idx.str(), "auto", Splits::train); }).find("no IDX training"),
            std::string::npos);
  write(idx / "train-images-idx3-ubyte", "not an IDX file");
  write(idx / "train-labels-idx1-ubyte", "nor this");
  EXPECT_EQ(open_dataset(idx.str(), "auto", Splits::eval).test->n, 3);
  EXPECT_NE(test::error_of([&] { open_dataset(idx.str()); }), "(no error)");
  const InputSpec in{1, 4, 5, {0.5f}, {0.25f}};
  DataSources s = make_datasets(idx.str(), "auto", in, 0.0, 0, false, Splits::eval);
  ASSERT_TRUE(s.eval);
  EXPECT_EQ(s.eval->size(), 3);
  EXPECT_FALSE(s.train);

  test::TempDir cifar("cifartest");
  std::string rec(1, char(7));
  rec.append(3072, '\x10');
  write(cifar / "test_batch.bin", rec + rec);
  d = open_dataset(cifar.str(), "auto", Splits::eval);
  EXPECT_EQ(d.kind, "cifar10");
  EXPECT_EQ(d.test->n, 2);
  EXPECT_NE(test::error_of([&] { open_dataset(cifar.str()); }).find("no CIFAR-10 training batches"),
            std::string::npos);

  test::TempDir c100("c100test");
  std::string r100{char(3), char(77)};
  r100.append(3072, '\x05');
  write(c100 / "test.bin", r100);
  d = open_dataset(c100.str(), "auto", Splits::eval);
  EXPECT_EQ(d.kind, "cifar100");
  EXPECT_EQ(d.test->labels[0], 77);
  EXPECT_NE(
      test::error_of([&] { open_dataset(c100.str(), "auto", Splits::train); }).find("no CIFAR-100 train.bin"),
      std::string::npos);
}

TEST(Cifar, Cifar10And100Batches) {
  test::TempDir dir("cifar");
  auto record = [](int label, int fill) {
    std::string r(1, char(label));
    r.append(3072, char(fill));
    return r;
  };
  std::string batch;
  for (int i = 0; i < 5; ++i) batch += record(i, 10 * i);
  for (int b = 1; b <= 5; ++b) write(dir / ("data_batch_" + std::to_string(b) + ".bin"), batch);
  write(dir / "test_batch.bin", record(9, 200));
  DatasetSplits d = open_dataset(dir.str());
  EXPECT_EQ(d.kind, "cifar10");
  EXPECT_EQ(d.train->n, 25);
  EXPECT_EQ(d.train->labels[3], 3);
  EXPECT_EQ(d.train->pixels[3 * 3072 + 1000], 30);
  EXPECT_EQ(d.test->labels[0], 9);
  // Batches of whole records, fewer than the archive's: said (a copy cut on a record's end read
  // as a smaller dataset without a word).
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(
      d.notes[0],
      "fewer records than the CIFAR archive's batches (a copy cut short?): data_batch_1.bin 5 of 10000, "
      "data_batch_2.bin 5 of 10000, data_batch_3.bin 5 of 10000, data_batch_4.bin 5 of 10000, "
      "data_batch_5.bin 5 of 10000, test_batch.bin 1 of 10000");
  // A download cut short: the batches there train, with a note (it trained on a fifth silently).
  for (int b = 2; b <= 5; ++b) std::filesystem::remove(dir / ("data_batch_" + std::to_string(b) + ".bin"));
  d = open_dataset(dir.str());
  EXPECT_EQ(d.train->n, 5);
  ASSERT_EQ(d.notes.size(), 2u);
  EXPECT_NE(d.notes[0].find("1 of CIFAR-10's 5 training batches"), std::string::npos) << d.notes[0];
  const std::vector<std::string> eval_notes = open_dataset(dir.str(), "auto", Splits::eval).notes;
  ASSERT_EQ(eval_notes.size(), 1u);  // evaluation reads no training batch
  EXPECT_EQ(eval_notes[0],
            "fewer records than the CIFAR archive's batches (a copy cut short?): test_batch.bin 1 of 10000");
  write(dir / "test_batch.bin", record(9, 200).substr(0, 100));
  EXPECT_NE(test::error_of([&] { open_dataset(dir.str()); }).find("not a whole number"), std::string::npos);
  write(dir / "test_batch.bin", record(12, 0));
  EXPECT_NE(test::error_of([&] { open_dataset(dir.str()); }).find("label 12"), std::string::npos);

  test::TempDir d100("cifar100");
  std::string rec(2, '\0');
  rec[0] = 3;   // coarse
  rec[1] = 77;  // fine
  rec.append(3072, '\x05');
  write(d100 / "train.bin", rec + rec);
  write(d100 / "test.bin", rec);
  DatasetSplits c = open_dataset(d100.str(), "cifar100");
  EXPECT_EQ(c.train->n, 2);
  EXPECT_EQ(c.train->labels[1], 77);
  EXPECT_EQ(c.train->num_classes, 100);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("train.bin 2 of 50000, test.bin 1 of 10000"), std::string::npos) << c.notes[0];
  EXPECT_TRUE(c.train->class_names.empty());
  EXPECT_EQ(read_cifar100(d100 / "test.bin", false).labels[0], 3);
  // The 20 superclasses (--dataset cifar100-coarse; always the fine labels before), and the
  // archive's names files beside the batches (CRLF lines, a blank line at the end).
  std::string fine, coarse;
  for (int i = 0; i < 100; ++i) fine += "fine" + std::to_string(i) + "\r\n";
  for (int i = 0; i < 20; ++i) coarse += "coarse" + std::to_string(i) + "\n";
  write(d100 / "fine_label_names.txt", fine + "\n");
  write(d100 / "coarse_label_names.txt", coarse);
  c = open_dataset(d100.str(), "cifar100-coarse");
  EXPECT_EQ(c.kind, "cifar100-coarse");
  EXPECT_EQ(c.train->num_classes, 20);
  EXPECT_EQ(c.train->labels[1], 3);
  ASSERT_EQ(c.test->class_names.size(), 20u);
  EXPECT_EQ(c.test->class_names[3], "coarse3");
  c = open_dataset(d100.str());
  ASSERT_EQ(c.train->class_names.size(), 100u);
  EXPECT_EQ(c.train->class_names[77], "fine77");
  write(d100 / "coarse_label_names.txt", "a\nb\n");
  EXPECT_NE(
      test::error_of([&] { open_dataset(d100.str(), "cifar100-coarse"); }).find("2 names for 20 classes"),
      std::string::npos);
}

TEST(Split, DisjointAndCoversEverything) {
  auto [tr, va] = split_indices(100, 0.1, 3);
  EXPECT_EQ(va.size(), 10u);
  std::set<int64_t> all(tr.begin(), tr.end());
  all.insert(va.begin(), va.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_EQ(split_indices(100, 0.1, 3).second, va);  // deterministic
}

namespace {
// A dataset whose sample is its pixel index 1..24 (or one value everywhere), for checking
// geometry.
class Ramp : public Dataset {
 public:
  Ramp() = default;
  explicit Ramp(float constant) : constant_(constant) {}
  int64_t size() const override { return 8; }
  int64_t num_classes() const override { return 2; }
  int64_t channels() const override { return 1; }
  int64_t height() const override { return 4; }
  int64_t width() const override { return 6; }
  int64_t get(int64_t, float* image) const override {
    for (int i = 0; i < 24; ++i) image[i] = constant_ != 0.f ? constant_ : float(i + 1);
    return 1;
  }
  std::string describe() const override { return "ramp"; }

 private:
  float constant_ = 0.f;
};
}  // namespace

TEST(Augment, CropShiftsWithZeroPaddingAndFlipMirrors) {
  Ramp base;
  AugmentConfig crop_cfg;
  crop_cfg.crop_pad = 2;
  AugmentedDataset crop(base, crop_cfg, 1);
  std::set<std::pair<int, int>> shifts;
  for (int64_t i = 0; i < 8; ++i) {
    std::vector<float> img(24);
    crop.get(i, img.data());
    // Every output pixel is a zero (padding) or the source shifted by one (dy, dx).
    int dy = 99, dx = 99;
    for (int y = 0; y < 4 && dy == 99; ++y)
      for (int x = 0; x < 6; ++x)
        if (img[y * 6 + x] != 0.f) {
          const int src = int(img[y * 6 + x]) - 1;
          dy = src / 6 - y;
          dx = src % 6 - x;
          break;
        }
    ASSERT_NE(dy, 99);
    EXPECT_LE(std::abs(dy), 2);
    EXPECT_LE(std::abs(dx), 2);
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 6; ++x) {
        const int sy = y + dy, sx = x + dx;
        const float want = (sy >= 0 && sy < 4 && sx >= 0 && sx < 6) ? float(sy * 6 + sx + 1) : 0.f;
        ASSERT_EQ(img[y * 6 + x], want) << i << " " << y << " " << x;
      }
    shifts.insert({dy, dx});
  }
  EXPECT_GT(shifts.size(), 3u);
  AugmentConfig flip_cfg;
  flip_cfg.hflip = 1.f;
  AugmentedDataset flip(base, flip_cfg, 1);
  std::vector<float> img(24);
  flip.get(0, img.data());
  EXPECT_EQ(img[0], 6.f);
  EXPECT_EQ(img[5], 1.f);
  // Vertically (rows 0-3 of the 4 x 6 ramp reversed), then both ways.
  flip_cfg.hflip = 0.f;
  flip_cfg.vflip = 1.f;
  AugmentedDataset vflip(base, flip_cfg, 1);
  vflip.get(0, img.data());
  EXPECT_EQ(img[0], 19.f);
  EXPECT_EQ(img[18], 1.f);
  EXPECT_EQ(img[23], 6.f);
  flip_cfg.hflip = 1.f;
  AugmentedDataset both(base, flip_cfg, 1);
  both.get(0, img.data());
  EXPECT_EQ(img[0], 24.f);
  EXPECT_EQ(img[23], 1.f);
  // Same (seed, epoch, index): same draws; another epoch: other draws.
  std::vector<float> a(24), b(24);
  crop.get(3, a.data());
  crop.get(3, b.data());
  EXPECT_EQ(a, b);
  int differ = 0;
  for (int64_t i = 0; i < 8; ++i) {
    crop.set_epoch(0);
    crop.get(i, a.data());
    crop.set_epoch(1);
    crop.get(i, b.data());
    differ += a != b;
  }
  EXPECT_GT(differ, 0);
}

// --crop-fill: the padding is black (pixel 0, normalized: -mean / std), as torchvision's
// RandomCrop pads, or the mean (0 once normalized).
TEST(Augment, CropPadsWithBlackOrTheMean) {
  Ramp base;  // its values 1..24 are neither fill
  for (const char* fill : {"black", "mean"}) {
    AugmentConfig cfg;
    cfg.crop_pad = 2;
    cfg.crop_fill = fill;
    cfg.mean = {0.5f};
    cfg.std = {0.25f};
    const float want = std::string(fill) == "black" ? -2.f : 0.f;
    AugmentedDataset crop(base, cfg, 1);
    int padded = 0;
    for (int64_t i = 0; i < 8; ++i) {
      std::vector<float> img(24);
      crop.get(i, img.data());
      for (float v : img) {
        if (v >= 1.f) continue;  // from the image
        EXPECT_EQ(v, want) << fill << " sample " << i;
        ++padded;
      }
    }
    EXPECT_GT(padded, 0) << fill;
  }
  AugmentConfig bad;
  bad.crop_fill = "white";
  EXPECT_NE(test::error_of([&] { AugmentedDataset(base, bad, 1); }).find("black or mean"), std::string::npos);
}

// Random resized crop resizes the box alone, as torchvision crops and then resizes: a
// constant image stays constant (sampling outside the box would blend in the fill).
TEST(Augment, ResizedCropSamplesOnlyInsideItsBox) {
  Ramp base(3.f);
  AugmentConfig cfg;
  cfg.scale_min = 0.2f;
  cfg.scale_max = 0.6f;
  AugmentedDataset crop(base, cfg, 1);
  float worst = 0.f;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    crop.set_epoch(epoch);
    for (int64_t i = 0; i < 8; ++i) {
      std::vector<float> img(24);
      crop.get(i, img.data());
      for (float v : img) worst = std::max(worst, std::fabs(v - 3.f));
    }
  }
  EXPECT_LT(worst, 1e-6f) << "worst difference from the constant";
}

// Color jitter against torchvision (tools/make_augment_fixtures.py): adjust_brightness,
// adjust_contrast and adjust_saturation in the given orders with the given factors, on a
// 3-channel and a 1-channel image. float32 both sides; the sums of the means differ in order.
TEST(Augment, ColorJitterIsTorchvisionsAdjustments) {
  const SafeTensors fx = SafeTensors::open(std::string(VIT_FIXTURE_DIR) + "/color_jitter.safetensors");
  const auto cases = nlohmann::json::parse(fx.metadata().at("cases"));
  ASSERT_EQ(cases.size(), 4u);
  for (size_t k = 0; k < cases.size(); ++k)
    for (const char* c : {"3", "1"}) {
      std::vector<float> img = fx.to_float(std::string("image") + c);
      const std::vector<float> want = fx.to_float("out" + std::string(c) + "." + std::to_string(k));
      int order[3];
      float factors[3];
      for (int i = 0; i < 3; ++i) {
        order[i] = cases[k]["order"][i].get<int>();
        factors[i] = cases[k]["factors"][i].get<float>();
      }
      color_jitter(img.data(), c[0] == '3' ? 3 : 1, 5, 7, order, 3, factors);
      EXPECT_TRUE(test::close_rel_max("case " + std::to_string(k) + ", " + c + " channel(s)", img.data(),
                                      want.data(), int64_t(want.size()), 2e-6, 1.0));
    }
}

// timm's RandAugment and 3-Augment ops against Pillow 9 (tools/make_augment_fixtures.py): each
// op at a few arguments on an RGB and an L image of 8-bit pixels, compared in 8-bit steps.
// Pillow's LUTs, blends, 3x3 filter, box blurs and bilinear affine sampling truncate and round
// where vitcpp does, so every pixel must match exactly.
TEST(Augment, RandAugmentOpsArePillows) {
  const SafeTensors fx = SafeTensors::open(std::string(VIT_FIXTURE_DIR) + "/rand_augment_pil.safetensors");
  const auto ops = nlohmann::json::parse(fx.metadata().at("ops"));
  const auto fill8 = nlohmann::json::parse(fx.metadata().at("fill"));
  const std::map<std::string, PilOp> names = {{"AutoContrast", PilOp::AutoContrast},
                                              {"Equalize", PilOp::Equalize},
                                              {"Invert", PilOp::Invert},
                                              {"Rotate", PilOp::Rotate},
                                              {"Posterize", PilOp::Posterize},
                                              {"Solarize", PilOp::Solarize},
                                              {"SolarizeAdd", PilOp::SolarizeAdd},
                                              {"Color", PilOp::Color},
                                              {"Contrast", PilOp::Contrast},
                                              {"Brightness", PilOp::Brightness},
                                              {"Sharpness", PilOp::Sharpness},
                                              {"ShearX", PilOp::ShearX},
                                              {"ShearY", PilOp::ShearY},
                                              {"TranslateX", PilOp::TranslateX},
                                              {"TranslateY", PilOp::TranslateY},
                                              {"Grayscale", PilOp::Grayscale},
                                              {"GaussianBlur", PilOp::GaussianBlur}};
  ASSERT_EQ(ops.size(), 47u);
  std::set<std::string> seen;
  for (size_t k = 0; k < ops.size(); ++k)
    for (const std::string image : {"rgb", "gray"}) {
      const std::string name = ops[k][0].get<std::string>();
      seen.insert(name);
      const double arg = ops[k][1].get<double>();
      std::vector<float> img = fx.to_float(image);
      const std::vector<float> want = fx.to_float(image + "." + std::to_string(k));
      const int64_t C = image == "rgb" ? 3 : 1;
      float fill[3];
      for (int c = 0; c < 3; ++c) fill[c] = fill8[size_t(c)].get<float>() / 255.f;
      pil_op(names.at(name), arg, img.data(), C, 9, 11, fill);
      EXPECT_TRUE(test::pixels_match(
          name + "(" + std::to_string(arg) + ") on " + image + ", vitcpp vs Pillow", img, want, 0, 0.0));
    }
  EXPECT_EQ(seen.size(), names.size()) << "every op is checked";
}

// In the dataset: the factors are drawn from [1 - S, 1 + S] per sample and epoch, the same
// on a second read; S = 0 for an adjustment leaves it out.
TEST(Augment, ColorJitterDrawsPerSampleAndKeepsItsDraws) {
  Ramp base;
  AugmentConfig cfg;
  cfg.mean = {0.f};
  cfg.std = {1.f / 30.f};  // the ramp's 1..24 are the [0, 1] values 1/30..24/30
  cfg.jitter[0] = 0.4f;
  AugmentedDataset aug(base, cfg, 3);
  std::vector<float> a(24), b(24);
  std::set<float> ratios;
  for (int64_t i = 0; i < 8; ++i) {
    aug.get(i, a.data());
    aug.get(i, b.data());
    EXPECT_EQ(a, b) << i;
    const float r = a[0];  // brightness alone: every value times one factor (1 -> r)
    EXPECT_GE(r, 0.6f - 1e-5f);
    EXPECT_LE(r, 1.4f + 1e-5f);
    for (int k = 1; k < 20; ++k)  // below 21 the scaled values stay under 1: no clamp
      EXPECT_NEAR(a[size_t(k)], r * float(k + 1), 1e-4f) << i << " " << k;
    ratios.insert(r);
  }
  EXPECT_GT(ratios.size(), 6u);
  cfg.jitter[0] = 0.f;
  cfg.jitter[2] = 0.5f;  // saturation only: one channel is left as it is
  AugmentedDataset sat(base, cfg, 3);
  sat.get(0, a.data());
  for (int k = 0; k < 24; ++k) EXPECT_NEAR(a[size_t(k)], float(k + 1), 1e-4f) << k;
}

TEST(Augment, RandAugmentFillsWithTheMeanAsTimm) {
  // Translate x by 0.45 * 0.5 of the width (4.5 of 20 pixels) on a white image: the columns
  // from outside take the fill, those from inside stay white, the one between is half each.
  std::vector<float> img(2 * 3 * 20, 1.f);
  const float fill[2] = {0.25f, 0.75f};
  rand_augment_op(5, 0.5f, img.data(), 2, 3, 20, fill);
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 20; ++x) {
        const float want = x <= 14 ? 1.f : x == 15 ? 0.5f * (1.f + fill[c]) : fill[c];
        EXPECT_FLOAT_EQ(img[size_t((c * 3 + y) * 20 + x)], want) << c << " " << y << " " << x;
      }
  // Through the dataset: MNIST's normalization, so timm's fill is the pixel round(255 *
  // 0.1307) = 33, normalized. Some samples show it (a geometric op drawn last), none the old
  // 0.5 gray.
  const Ramp white(1.f);
  AugmentConfig ra;
  ra.auto_augment = "rand-m9-n2";
  ra.mean = {0.1307f};
  ra.std = {0.3081f};
  const float want = (33.f / 255.f - 0.1307f) / 0.3081f, gray = (0.5f - 0.1307f) / 0.3081f;
  // How many pixels of 16 seeds' 8 samples show the mean fill and the gray one.
  auto fills = [&] {
    std::vector<float> x(24);
    std::pair<int, int> n{0, 0};
    for (uint64_t seed = 1; seed <= 16; ++seed) {
      AugmentedDataset aug(white, ra, seed);
      for (int64_t i = 0; i < 8; ++i) {
        aug.get(i, x.data());
        for (float v : x) {
          n.first += std::fabs(v - want) < 1e-5f;
          n.second += std::fabs(v - gray) < 1e-5f;
        }
      }
    }
    return n;
  };
  const auto [filled, grayed] = fills();
  EXPECT_GT(filled, 0);
  EXPECT_EQ(grayed, 0);
  ra.aa_ops = "mild";  // the mild ops fill so too
  const auto [filled_mild, grayed_mild] = fills();
  EXPECT_GT(filled_mild, 0);
  EXPECT_EQ(grayed_mild, 0);
  ra.aa_fill = "gray";  // the fill of runs recorded before 2026-12-04 (with the mild ops)
  const auto [filled_old, grayed_old] = fills();
  EXPECT_EQ(filled_old, 0);
  EXPECT_GT(grayed_old, 0);
  ra.aa_fill = "white";
  EXPECT_NE(test::error_of([&] { AugmentedDataset(white, ra, 1); }).find("--aa-fill"), std::string::npos);
}

// Each op's argument as timm's LEVEL_TO_ARG gives it (auto_augment.py, values worked out
// there): the default set's and the increasing set's, past magnitude 10 too (mmax).
TEST(Augment, RandAugmentsArgumentsAreTimms) {
  struct Case {
    PilOp op;
    bool inc;
    double m, sign, want;
  };
  for (const Case& c : std::vector<Case>{{PilOp::Rotate, false, 9, -1, -27},
                                         {PilOp::Posterize, false, 9, 1, 3},
                                         {PilOp::Posterize, true, 9, 1, 1},
                                         {PilOp::Posterize, false, 10, 1, 4},
                                         {PilOp::Solarize, false, 9, 1, 230},
                                         {PilOp::Solarize, true, 9, 1, 26},
                                         {PilOp::SolarizeAdd, false, 9, 1, 99},
                                         {PilOp::SolarizeAdd, false, 20, 1, 128},  // timm's cap
                                         {PilOp::Color, false, 9, -1, 1.72},
                                         {PilOp::Contrast, true, 9, -1, 0.19},
                                         {PilOp::Brightness, true, 9, 1, 1.81},
                                         {PilOp::Sharpness, true, 20, -1, 0.1},  // held to 0.1
                                         {PilOp::ShearX, false, 9, -1, -0.27},
                                         {PilOp::TranslateX, false, 9, 1, 0.405 * 20},  // of the width
                                         {PilOp::TranslateY, false, 9, 1, 0.405 * 10}})
    EXPECT_NEAR(timm_op_arg(c.op, c.inc, c.m, c.sign, 10, 20), c.want, 1e-12)
        << int(c.op) << (c.inc ? " inc" : "") << " m" << c.m;
}

// timm's fill is min(255, round(255 * mean)) in Python: the mean as written, half to even.
// A mean of 0.3 fills 76 (255 * 0.3 = 76.4999...), where float's 0.30000001 gave 77.
TEST(Augment, RandAugmentsFillRoundsAsTimm) {
  const Ramp white(1.f);
  AugmentConfig ra;
  ra.auto_augment = "rand-m9-n2";
  ra.mean = {0.3f};
  ra.std = {1.f};
  std::pair<int, int> n{0, 0};
  std::vector<float> x(24);
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    AugmentedDataset aug(white, ra, seed);
    for (int64_t i = 0; i < 8; ++i) {
      aug.get(i, x.data());
      for (float v : x) {
        n.first += std::fabs(v - (76.f / 255.f - 0.3f)) < 1e-6f;
        n.second += std::fabs(v - (77.f / 255.f - 0.3f)) < 1e-6f;
      }
    }
  }
  EXPECT_GT(n.first, 0);
  EXPECT_EQ(n.second, 0);
}

TEST(Augment, ResizedCropErasingAndRandAugment) {
  Ramp base;
  std::vector<float> plain(24), x(24), y(24);
  base.get(0, plain.data());
  // A resized crop of the whole image at aspect 1.5 (= 6/4) is the identity.
  AugmentConfig whole;
  whole.scale_min = whole.scale_max = 1.f;
  whole.ratio_min = whole.ratio_max = 1.5f;
  AugmentedDataset(base, whole, 1).get(0, x.data());
  for (int i = 0; i < 24; ++i) EXPECT_NEAR(x[i], plain[i], 1e-4) << i;
  // Erasing with probability 1 replaces a box and leaves the rest alone.
  AugmentConfig erase;
  erase.reprob = 1.f;
  AugmentedDataset er(base, erase, 1);
  int changed = 0;
  for (int64_t i = 0; i < 8; ++i) {
    er.get(i, x.data());
    for (int k = 0; k < 24; ++k) changed += x[k] != plain[k];
  }
  EXPECT_GT(changed, 0);
  EXPECT_LT(changed, 8 * 24);
  // RandAugment: deterministic per (seed, epoch, index), values stay in the normalized
  // range of [0, 1] pixels, and some samples change.
  AugmentConfig ra;
  ra.auto_augment = "rand-m9-n2";
  ra.mean = {0.f};
  ra.std = {1.f / 30.f};  // the ramp 1..24 is pixels 0.033..0.8: nothing needs clamping
  AugmentedDataset aug(base, ra, 3);
  int differ = 0;
  for (int64_t i = 0; i < 8; ++i) {
    aug.get(i, x.data());
    aug.get(i, y.data());
    EXPECT_EQ(x, y);
    for (float v : x) {
      EXPECT_GE(v, 0.f);
      EXPECT_LE(v, 30.f + 1e-3f);
    }
    differ += x != plain;
  }
  EXPECT_GT(differ, 2);
  AugmentedDataset none(base, AugmentConfig{}, 3);  // and without ops the image is untouched
  none.get(5, x.data());
  EXPECT_EQ(x, plain);
  ra.auto_augment = "rand-9";
  EXPECT_NE(test::error_of([&] {
              AugmentedDataset(base, ra, 3);
            }).find("--aa rand-9: expected 3a (3-Augment), or rand-"),
            std::string::npos);
}

// The default ops are timm's: one op in every image (n1, p1) on a ramp, drawn from timm's 15,
// inverts some images (1 - v), as timm's Invert; the mild set has no such op.
TEST(Augment, RandAugmentDrawsTimmsOpsOrTheMildOnes) {
  Ramp base;
  for (const std::string ops : {"timm", "mild"}) {
    AugmentConfig c;
    c.auto_augment = "rand-m9-n1-p1";
    c.aa_ops = ops;
    c.mean = {0.f};
    c.std = {1.f / 255.f};  // the ramp's 1..24 are 8-bit pixels
    AugmentedDataset d(base, c, 5);
    std::vector<float> x(24);
    int inverted = 0;
    for (int64_t i = 0; i < 64; ++i) {
      d.get(i, x.data());
      bool all = true;
      for (int k = 0; k < 24; ++k) all = all && std::fabs(x[size_t(k)] - float(255 - (k + 1))) < 1e-3f;
      inverted += all;
    }
    if (ops == "timm")
      EXPECT_GT(inverted, 0) << "no image of 64 inverted: is Invert among the ops?";
    else
      EXPECT_EQ(inverted, 0);
  }
  AugmentConfig bad;
  bad.aa_ops = "weak";
  EXPECT_NE(test::error_of([&] { bad.validate(); }).find("--aa-ops: expected timm or mild, got 'weak'"),
            std::string::npos);
}

// timm's RandAugment options: each changes the images as it says, the defaults written out
// change nothing, and an option vitcpp does not implement is an error, never ignored.
TEST(Augment, RandAugmentTakesTimmsOptionsAndRefusesOthers) {
  const AutoAugmentSpec s = parse_auto_augment("rand-m9-mstd0.5-inc1");
  EXPECT_EQ(s.m, 9.f);
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.mstd, 0.5f);
  EXPECT_EQ(s.mmax, 10.f);
  EXPECT_EQ(s.p, 0.5f);
  EXPECT_EQ(parse_auto_augment("rand-m15-mmax20").mmax, 20.f);
  for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
           {"rand-m9-n2-foo3", "unknown option 'foo'"},
           {"rand-m9-w0", "w (op weights, which timm dropped too) is not implemented"},
           {"rand-m9-mmax0-m11", "magnitude 11 is above mmax 10"},  // mmax 0 is 10, as timm
           {"rand-m15", "magnitude 15 is above mmax 10"},
           {"rand-m9-n0", "n (ops per image) must be 1 to 100"},
           {"rand-m9-p2", "p (each op's probability) must be at most 1"},
           {"rand-mx", "at 'mx'"},
           {"rand-m9.5.1", "at 'm9.5.1': not a number"},
           {"rand-m9-", "at ''"},
           {"augmix-m5", "expected 3a (3-Augment), or rand-"},
           {"3a-m9", "3-Augment takes one option, mstd"},
           {"3ab", "3-Augment takes one option, mstd"},
           {"3a-mstdx", "mstd must be a number >= 0"}})
    EXPECT_NE(test::error_of([&] { parse_auto_augment(text); }).find(error), std::string::npos) << text;

  Ramp base;
  bool mild = false;
  auto images = [&](const std::string& aa) {
    AugmentConfig c;
    c.auto_augment = aa;
    c.aa_ops = mild ? "mild" : "timm";
    c.mean = {0.f};
    c.std = {1.f / 30.f};
    AugmentedDataset d(base, c, 3);
    std::vector<float> all(8 * 24);
    for (int64_t i = 0; i < 8; ++i) d.get(i, all.data() + i * 24);
    return all;
  };
  const std::vector<float> plain = images("rand-m9-n2");
  EXPECT_EQ(images("rand-m9-n2-p0.5-mmax10-mstd0"), plain);  // the defaults written out change nothing
  EXPECT_EQ(images("rand-m9-n2-p0.5-mmax10-inc0-mstd0"), images("rand-m9-n2-inc1"));
  EXPECT_NE(images("rand-m9-n2-inc1"), plain);                    // the increasing set
  EXPECT_TRUE(parse_auto_augment("rand-m9-n2-inc0").increasing);  // timm takes any inc value as true
  EXPECT_FALSE(parse_auto_augment("rand-m9-n2").increasing);
  // Past magnitude 10 (mmax above it) the enhance factor stops at 0.1, as timm's: brightness
  // at -20 scales by 0.1, not by 1 - 0.9 * 2 = -0.8.
  float px[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  const float fill[1] = {0.f};
  rand_augment_op(7, -2.f, px, 1, 2, 2, fill);
  EXPECT_FLOAT_EQ(px[0], 0.05f);
  EXPECT_EQ(images("rand-m9"), plain);  // n 2 by default, as timm
  EXPECT_NE(images("rand-m9-n2-mstd0.5"), plain);
  EXPECT_NE(images("rand-m9-n2-mstd101"), plain);
  EXPECT_NE(images("rand-m9-n2-p1"), plain);
  EXPECT_NE(images("rand-m9-n3"), plain);
  EXPECT_EQ(images("rand-m9-n2-p0"), images("rand-m0-n2-p0"));  // p 0: no op applies
  std::vector<float> untouched(8 * 24);
  for (int64_t i = 0; i < 8; ++i) base.get(i, untouched.data() + i * 24);
  // Through [0, 1] and back: timm's ops see 8-bit pixels, so the ramp's values k / 30 move to
  // the nearest of 255 steps (half a step is 15 / 255 here); the mild ones round in float only.
  const std::vector<float> p0 = images("rand-m9-n2-p0");
  for (size_t i = 0; i < p0.size(); ++i) {
    EXPECT_NEAR(p0[i], untouched[i], 15.f / 255.f + 1e-5f) << i;
    EXPECT_NEAR(p0[i] / 30.f * 255.f, std::round(untouched[i] / 30.f * 255.f), 1e-3f) << i;
  }
  mild = true;
  const std::vector<float> p0_mild = images("rand-m9-n2-p0");
  for (size_t i = 0; i < p0_mild.size(); ++i) EXPECT_NEAR(p0_mild[i], untouched[i], 1e-5f) << i;
  EXPECT_NE(images("rand-m9-n2"), plain);  // another set of ops
}

}  // namespace vit

namespace vit {

namespace {
// Sample i is the constant i; sample `bad` throws.
class Numbers : public Dataset {
 public:
  explicit Numbers(int64_t n, int64_t bad = -1, int64_t bad2 = -1) : n_(n), bad_(bad), bad2_(bad2) {}
  int64_t size() const override { return n_; }
  int64_t num_classes() const override { return 1000; }
  int64_t channels() const override { return 1; }
  int64_t height() const override { return 1; }
  int64_t width() const override { return 2; }
  int64_t get(int64_t i, float* image) const override {
    VIT_CHECK(i != bad_ && i != bad2_, "sample ", i, " is broken");
    image[0] = image[1] = float(i);
    return i;
  }
  std::string describe() const override { return "numbers"; }

 private:
  int64_t n_, bad_, bad2_;
};
}  // namespace

TEST(Prefetcher, ServesBatchesInOrderAndPassesErrorsOn) {
  Numbers data(10);
  std::vector<int64_t> order = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  Prefetcher pf(data, order, 4);
  ASSERT_EQ(pf.steps(), 3);
  for (int64_t s = 0; s < 3; ++s) {
    float* x;
    const int64_t* y;
    const int64_t n = pf.next(s, &x, &y);
    EXPECT_EQ(n, s < 2 ? 4 : 2);
    for (int64_t b = 0; b < n; ++b) {
      EXPECT_EQ(y[b], order[s * 4 + b]);
      EXPECT_EQ(x[2 * b + 1], float(order[s * 4 + b]));
    }
  }
  Numbers broken(10, 3);  // in batch 1 (samples 5, 4, 3, 2)
  Prefetcher pb(broken, order, 4);
  float* x;
  const int64_t* y;
  pb.next(0, &x, &y);
  EXPECT_NE(test::error_of([&] { pb.next(1, &x, &y); }).find("sample 3 is broken"), std::string::npos);
  // Destroyed mid-epoch (an early stop, an exception): no hang.
  Prefetcher early(data, order, 2);
  early.next(0, &x, &y);
}

// With several workers (vit train -j) each batch is loaded in parts at once: the same
// batches as one worker, and of two broken samples in one batch the first is reported,
// whichever part finishes first.
TEST(Prefetcher, WorkersServeTheSameBatchesAndTheFirstError) {
  Numbers data(103);
  std::vector<int64_t> order(103);
  for (int64_t i = 0; i < 103; ++i) order[size_t(i)] = 102 - i;
  Prefetcher one(data, order, 16), three(data, order, 16, 0, 3);
  for (int64_t s = 0; s < one.steps(); ++s) {
    float *x1, *x3;
    const int64_t *y1, *y3;
    const int64_t n = one.next(s, &x1, &y1);
    ASSERT_EQ(three.next(s, &x3, &y3), n);
    EXPECT_EQ(std::vector<float>(x1, x1 + 2 * n), std::vector<float>(x3, x3 + 2 * n)) << s;
    EXPECT_EQ(std::vector<int64_t>(y1, y1 + n), std::vector<int64_t>(y3, y3 + n)) << s;
  }
  // Batch 3 holds samples 54..39: 50 (in the first of 3 parts) and 40 (in the last).
  for (int workers : {1, 3, 16, 40}) {
    Numbers broken(103, 40, 50);
    Prefetcher pb(broken, order, 16, 0, workers);
    float* x;
    const int64_t* y;
    for (int64_t s = 0; s < 3; ++s) pb.next(s, &x, &y);
    EXPECT_NE(test::error_of([&] { pb.next(3, &x, &y); }).find("sample 50 is broken"), std::string::npos)
        << workers << " workers";
  }
}

// vit binds its compute threads one to a CPU (core/threads.h); the loader's threads, started
// by the first of them, must not stay on its one CPU: they load on every CPU the process has.
TEST(Prefetcher, LoadsOnEveryCpuAfterTheComputeThreadsAreBound) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  if (cpus < 2) GTEST_SKIP() << "one CPU here: nothing to bind";
  for (const char* v : {"OMP_PROC_BIND", "OMP_PLACES"})
    if (std::getenv(v)) GTEST_SKIP() << v << " is set: binding is not vit's here";
  set_num_threads(cpus);
  ASSERT_EQ(bind_threads(), cpus);
  // Numbers whose samples hold the number of CPUs the thread that loaded them may run on.
  class Cpus : public Numbers {
   public:
    Cpus() : Numbers(64) {}
    int64_t get(int64_t, float* image) const override {
      cpu_set_t m;
      image[0] = image[1] = sched_getaffinity(0, sizeof m, &m) == 0 ? float(CPU_COUNT(&m)) : 0.f;
      return 0;
    }
  } data;
  std::vector<int64_t> order(64);
  for (int64_t i = 0; i < 64; ++i) order[size_t(i)] = i;
  for (int workers : {1, 4}) {
    Prefetcher pf(data, order, 16, 0, workers);
    for (int64_t s = 0; s < pf.steps(); ++s) {
      float* x;
      const int64_t* y;
      const int64_t n = pf.next(s, &x, &y);
      for (int64_t b = 0; b < n; ++b)
        ASSERT_EQ(x[2 * b], float(cpus)) << workers << " workers, batch " << s << ", sample " << b;
    }
  }
}

// A run resumed within an epoch starts at its step: the batches from there on are the
// same, and the samples before it are never read (sample 9, in batch 0, is broken here).
TEST(Prefetcher, StartsAtAGivenStep) {
  Numbers data(10, 9);
  const std::vector<int64_t> order = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  Prefetcher pf(data, order, 4, 1);
  for (int64_t s = 1; s < 3; ++s) {
    float* x;
    const int64_t* y;
    const int64_t n = pf.next(s, &x, &y);
    ASSERT_EQ(n, s < 2 ? 4 : 2);
    for (int64_t b = 0; b < n; ++b) EXPECT_EQ(y[b], order[s * 4 + b]);
  }
  Prefetcher last(data, order, std::vector<int64_t>{4, 8, 10}, 2);
  float* x;
  const int64_t* y;
  ASSERT_EQ(last.next(2, &x, &y), 2);
  EXPECT_EQ(y[1], 0);
}

}  // namespace vit
