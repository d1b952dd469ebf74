// timm's pixel augmentations beyond RandAugment: 3-Augment (--aa 3a), --color-jitter-prob,
// --grayscale-prob and --gaussian-blur-prob, against torchvision and through the dataset.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/pil_ops.h"
#include "io/safetensors.h"
#include "support/check.h"

namespace vit {
namespace {

// RGB samples of 14 x 15 8-bit pixels 1-255 (as values in [0, 1]; none 0, which const erasing
// writes), different per sample; with mean 0 and std 1 the dataset's values are the pixels, so
// an op left out leaves them as they are.
class Noise : public Dataset {
 public:
  static constexpr int64_t kC = 3, kH = 14, kW = 15, kN = kC * kH * kW;
  int64_t size() const override { return 48; }
  int64_t num_classes() const override { return 2; }
  int64_t channels() const override { return kC; }
  int64_t height() const override { return kH; }
  int64_t width() const override { return kW; }
  int64_t get(int64_t i, float* image) const override {
    for (int64_t k = 0; k < kN; ++k) image[k] = float((i * 7919 + k * k * 104729 + k) % 255 + 1) / 255.f;
    return 0;
  }
  std::string describe() const override { return "noise"; }
};

AugmentConfig pixels_config() {
  AugmentConfig c;
  c.mean = {0.f, 0.f, 0.f};
  c.std = {1.f, 1.f, 1.f};
  return c;
}

std::vector<float> sample(const Dataset& d, int64_t i) {
  std::vector<float> x(size_t(Noise::kN));
  d.get(i, x.data());
  return x;
}

bool gray(const std::vector<float>& x) {
  const int64_t hw = Noise::kH * Noise::kW;
  for (int64_t i = 0; i < hw; ++i)
    if (x[size_t(i)] != x[size_t(hw + i)] || x[size_t(i)] != x[size_t(2 * hw + i)]) return false;
  return true;
}

// The sum of absolute differences between horizontal neighbours: a blur lowers it.
double roughness(const std::vector<float>& x) {
  double s = 0;
  for (int64_t r = 0; r < Noise::kC * Noise::kH; ++r)
    for (int64_t c = 0; c + 1 < Noise::kW; ++c)
      s += std::fabs(x[size_t(r * Noise::kW + c + 1)] - x[size_t(r * Noise::kW + c)]);
  return s;
}

std::vector<float> pil(PilOp op, double arg, std::vector<float> x) {
  pil_op(op, arg, x.data(), Noise::kC, Noise::kH, Noise::kW, nullptr);
  return x;
}

}  // namespace

// torchvision's GaussianBlur(23) on 8-bit images (tools/make_augment_fixtures.py: tv_blur).
// torch sums the 529 taps in float32 in its own order and vitcpp in double, so a pixel
// whose exact value lies within float rounding of a half step may round the other way: at
// most 1 step, on at most 1% of the pixels; the rest match exactly (with Debian's
// torchvision 0.14 every pixel matches).
TEST(Augment, GaussianBlurIsTorchvisions) {
  const SafeTensors fx = SafeTensors::open(std::string(VIT_FIXTURE_DIR) + "/tv_blur.safetensors");
  const auto sigmas = nlohmann::json::parse(fx.metadata().at("sigmas"));
  ASSERT_EQ(sigmas.size(), 5u);
  for (size_t k = 0; k < sigmas.size(); ++k)
    for (const std::string image : {"rgb", "gray"}) {
      std::vector<float> img = fx.to_float(image);
      const std::vector<float> want = fx.to_float(image + "." + std::to_string(k));
      const double sigma = sigmas[k].get<double>();
      tv_gaussian_blur(img.data(), image == "rgb" ? 3 : 1, 14, 17, kBlurKernel, sigma);
      EXPECT_TRUE(test::pixels_match(
          "sigma " + std::to_string(sigma) + " on " + image + ", vitcpp vs torchvision", img, want, 1, 0.01));
    }
}

// timm's 3-Augment: each image gets exactly one of solarize at 128, grayscale, or a Pillow
// blur of radius in [0.1, 2]; all three occur, the same sample gives the same bits again,
// and mstd moves the magnitudes (solarize's threshold, the gray's share).
TEST(Augment, ThreeAugmentAppliesOneOfItsThreeOps) {
  const Noise base;
  AugmentConfig c = pixels_config();
  c.auto_augment = "3a";
  AugmentedDataset d(base, c, 9);
  int solarized = 0, grayed = 0, blurred = 0;
  for (int64_t i = 0; i < base.size(); ++i) {
    const std::vector<float> orig = sample(base, i), x = sample(d, i);
    EXPECT_EQ(x, sample(d, i)) << i;
    if (x == pil(PilOp::Solarize, 128, orig)) {
      ++solarized;
    } else if (x == pil(PilOp::Grayscale, 0, orig)) {
      EXPECT_TRUE(gray(x));
      ++grayed;
    } else {
      // A blur: smoother, and between the blurs of radius 0.1 and 2 in roughness.
      const double r = roughness(x);
      EXPECT_LE(r, roughness(pil(PilOp::GaussianBlur, 0.1, orig)) + 1e-3) << i;
      EXPECT_GE(r, roughness(pil(PilOp::GaussianBlur, 2.0, orig)) - 1e-3) << i;
      EXPECT_LT(r, roughness(orig)) << i;
      ++blurred;
    }
  }
  EXPECT_GT(solarized, 5);
  EXPECT_GT(grayed, 5);
  EXPECT_GT(blurred, 5);
  EXPECT_EQ(solarized + grayed + blurred, base.size());

  AugmentConfig noisy = c;
  noisy.auto_augment = "3a-mstd3";
  AugmentedDataset dn(base, noisy, 9);
  int moved = 0;
  for (int64_t i = 0; i < base.size(); ++i) {
    const std::vector<float> orig = sample(base, i), x = sample(dn, i);
    if (x == pil(PilOp::Solarize, 128, orig)) continue;
    for (int t = 0; t <= 256; ++t) moved += x == pil(PilOp::Solarize, t, orig);
  }
  EXPECT_GT(moved, 0) << "mstd moved no solarize threshold";

  AugmentConfig four = c;
  four.std = {1.f};
  four.mean = {0.f};
  EXPECT_NE(test::error_of([&] { AugmentedDataset(base, four, 1); }).find("--aa needs the normalization"),
            std::string::npos);
}

// --grayscale-prob and --gaussian-blur-prob: at 1 every image, at 0.5 some (the others
// untouched, bit for bit), each image's draw kept on a second read.
TEST(Augment, GrayscaleAndBlurApplyWithTheirProbability) {
  const Noise base;
  for (const bool blur : {false, true}) {
    for (const float p : {1.f, 0.5f}) {
      AugmentConfig c = pixels_config();
      (blur ? c.gaussian_blur_prob : c.grayscale_prob) = p;
      AugmentedDataset d(base, c, 4);
      int applied = 0;
      for (int64_t i = 0; i < base.size(); ++i) {
        const std::vector<float> orig = sample(base, i), x = sample(d, i);
        EXPECT_EQ(x, sample(d, i)) << i;
        if (x == orig) continue;  // not drawn; or a blur of sigma below about 0.2, which rounds to the image
        ++applied;
        if (blur)
          EXPECT_LT(roughness(x), roughness(orig)) << i;
        else
          EXPECT_EQ(x, pil(PilOp::Grayscale, 0, orig)) << i;
      }
      const std::string what = std::string(blur ? "blur" : "grayscale") + " at " + std::to_string(p);
      if (p == 1.f)
        EXPECT_GE(applied, blur ? base.size() - 6 : base.size()) << what;
      else
        EXPECT_TRUE(applied > 12 && applied < 36) << what << ": " << applied << " of 48";
    }
  }
  // torchvision's 23-tap reflection needs over 11 pixels a side.
  class Small : public Noise {
    int64_t height() const override { return 11; }
  } small;
  AugmentConfig c = pixels_config();
  c.gaussian_blur_prob = 0.5f;
  EXPECT_NE(test::error_of([&] { AugmentedDataset(small, c, 1); }).find("needs images over 11 pixels a side"),
            std::string::npos);
  c.gaussian_blur_prob = 1.5f;
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("--gaussian-blur-prob must be a probability"),
            std::string::npos);
  c.gaussian_blur_prob = 0.f;
  c.grayscale_prob = -0.1f;
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("--grayscale-prob must be a probability"),
            std::string::npos);
}

// --color-jitter-prob: timm's RandomApply around the jitter. At 0 no image changes; at 0.5
// some do; without it (1) every image is jittered.
TEST(Augment, ColorJitterProbAppliesTheJitterToSomeImages) {
  const Noise base;
  for (const float p : {0.f, 0.5f, 1.f}) {
    AugmentConfig c = pixels_config();
    c.jitter[0] = 0.4f;
    c.jitter_prob = p;
    AugmentedDataset d(base, c, 6);
    int jittered = 0;
    for (int64_t i = 0; i < base.size(); ++i) jittered += sample(d, i) != sample(base, i);
    if (p == 0.f)
      EXPECT_EQ(jittered, 0);
    else if (p == 1.f)
      EXPECT_EQ(jittered, base.size());
    else
      EXPECT_TRUE(jittered > 12 && jittered < 36) << jittered << " of 48";
  }
  AugmentConfig c = pixels_config();
  c.jitter_prob = 2.f;
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("--color-jitter-prob must be a probability"),
            std::string::npos);
}

}  // namespace vit

namespace vit {

// --remode and --recount, timm's RandomErasing: const boxes are zeros, rand boxes one value
// per channel, pixel boxes noise; one box per image by default (the erased pixels make a
// rectangle), 1 to --recount of them otherwise (some images then erased in several).
TEST(Augment, RandomErasingFillsAndCountsAsTimm) {
  const Noise base;
  constexpr int64_t kHW = Noise::kH * Noise::kW;
  // The pixels of channel c that differ from the original, and whether they fill their
  // bounding box.
  auto erased = [&](const std::vector<float>& x, const std::vector<float>& orig, int64_t c) {
    std::vector<int64_t> at;
    int64_t y0 = Noise::kH, y1 = -1, x0 = Noise::kW, x1 = -1;
    for (int64_t k = 0; k < kHW; ++k)
      if (x[size_t(c * kHW + k)] != orig[size_t(c * kHW + k)]) {
        at.push_back(k);
        y0 = std::min(y0, k / Noise::kW), y1 = std::max(y1, k / Noise::kW);
        x0 = std::min(x0, k % Noise::kW), x1 = std::max(x1, k % Noise::kW);
      }
    return std::pair{at, !at.empty() && int64_t(at.size()) == (y1 - y0 + 1) * (x1 - x0 + 1)};
  };
  for (const std::string mode : {"const", "rand", "pixel"})
    for (const int64_t count : {1, 4}) {
      AugmentConfig c = pixels_config();
      c.reprob = 1.f;
      c.re_mode = mode;
      c.re_count = count;
      AugmentedDataset d(base, c, 2);
      int split = 0;
      for (int64_t i = 0; i < base.size(); ++i) {
        const std::vector<float> orig = sample(base, i), x = sample(d, i);
        const auto [at, rectangle] = erased(x, orig, 0);
        ASSERT_FALSE(at.empty()) << mode << " " << i;
        split += !rectangle;
        for (int64_t ch = 0; ch < Noise::kC; ++ch) {
          std::set<float> values;
          for (int64_t k : at) values.insert(x[size_t(ch * kHW + k)]);
          if (mode == "const") {
            EXPECT_EQ(values, std::set<float>{0.f}) << i;
          } else if (mode == "rand" && count == 1) {
            EXPECT_EQ(values.size(), 1u) << i;  // one value a box and channel
          } else if (mode == "pixel") {
            EXPECT_GT(values.size(), at.size() / 2) << i;
          }
        }
      }
      if (count == 1)
        EXPECT_EQ(split, 0) << mode << ": an image of one box erased outside a rectangle";
      else
        EXPECT_GT(split, 0) << mode << ": no image of 48 got several boxes with --recount 4";
    }
  AugmentConfig c = pixels_config();
  c.re_mode = "zero";
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("--remode: expected pixel, rand or const, got 'zero'"),
            std::string::npos);
  c.re_mode = "pixel";
  c.re_count = 0;
  EXPECT_NE(test::error_of([&] { c.validate(); }).find("--recount must be 1 to 1000"), std::string::npos);
}

}  // namespace vit

namespace vit {

// timm's RepeatAugSampler for one process: each image's repeats side by side (i, i + n,
// i + 2n: the dataset's samples of one image), the images in the epoch's shuffled order,
// cut to n // 256 * 256 samples; a small set holds none.
TEST(Augment, RepeatedEpochOrderIsTimmsSampler) {
  const int64_t n = 600, r = 3;
  const std::vector<int64_t> order = repeated_epoch_order(n, r, 7, 2);
  ASSERT_EQ(int64_t(order.size()), 512);
  const std::vector<int64_t> images = epoch_order(n, 7, 2);
  for (size_t s = 0; s < order.size(); ++s) EXPECT_EQ(order[s], images[s / r] + int64_t(s % r) * n) << s;
  EXPECT_NE(repeated_epoch_order(n, r, 7, 3), order);  // another epoch, another order
  EXPECT_EQ(repeated_epoch_size(255), 0);
  EXPECT_EQ(repeated_epoch_size(60000), 59904);
  EXPECT_TRUE(repeated_epoch_order(200, 3, 7, 0).empty());
}

// The repeats of an image are its samples i + k n, each with its own augmentation; the
// first repeat draws as the dataset without repeats does (runs keep their bits).
TEST(Augment, RepeatsOfAnImageDrawTheirOwnAugmentation) {
  const Noise base;
  AugmentConfig c = pixels_config();
  c.reprob = 1.f;
  const AugmentedDataset once(base, c, 5), thrice(base, c, 5, 3);
  ASSERT_EQ(thrice.size(), 3 * base.size());
  std::vector<float> x(size_t(Noise::kN));
  for (int64_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(sample(thrice, i), sample(once, i)) << i;
    EXPECT_NE(sample(thrice, i + base.size()), sample(thrice, i)) << i;
    EXPECT_NE(sample(thrice, i + 2 * base.size()), sample(thrice, i + base.size())) << i;
    EXPECT_EQ(thrice.get(i + 2 * base.size(), x.data()), base.get(i, x.data()));  // the image's label
  }
}

}  // namespace vit
