// Training augmentation as a Dataset wrapper. Each sample's random draws depend only on
// (seed, epoch, index), so the same seed gives the same batches for any thread count and
// a resumed run sees exactly the augmentations it would have seen. In order:
//   scale_min > 0: random resized crop (area share in [scale_min, scale_max], aspect ratio
//                  log-uniform in [ratio_min, ratio_max], 10 tries then the central crop
//                  held to that range: torchvision's RandomResizedCrop). Image folders draw
//                  the box on the decoded file and resize it with Pillow's bilinear filter
//                  (Dataset::get_crop), as torchvision on a PIL image; other datasets draw it
//                  on the sample and resize bilinearly, edges repeated
//   crop_pad > 0:  pad by crop_pad pixels and take a random crop of the original size (seed
//                  002's RandomCrop(32, 4)); the padding is black (pixel value 0, as
//                  torchvision pads) or, with crop_fill "mean", the normalization's mean
//   hflip > 0:     flip horizontally with this probability
//   vflip > 0:     flip vertically with this probability (timm's --vflip)
//   auto_augment:  RandAugment "rand-mM-nN": N ops drawn from timm's 15 (auto-contrast,
//                  equalize, invert, rotate, posterize, solarize, solarize-add, color,
//                  contrast, brightness, sharpness, shear x/y, translate x/y; with inc1 the
//                  set whose ops grow with M), each applied with probability 0.5 at
//                  magnitude M, as Pillow on 8-bit pixels (data/pil_ops.h; timm's
//                  rand_augment_transform, its string's other options too: RandAugmentSpec);
//                  or, with aa_ops "mild", vitcpp's earlier 13 (identity, auto-contrast,
//                  rotate, shear x/y, translate x/y, brightness, contrast, color, solarize,
//                  posterize, sharpness, all growing with M, none inverting); the geometric
//                  ops fill with the normalization's mean, as timm's create_transform;
//                  or "3a": DeiT III's 3-Augment as timm's policy: one of solarize (threshold
//                  128), grayscale and a Gaussian blur of radius drawn from [0.1, 2], as Pillow
//   color_jitter:  brightness, contrast and saturation in a random order, each by a factor
//                  drawn uniformly from [max(0, 1 - s), 1 + s] for its strength s
//                  (torchvision's ColorJitter without hue, as timm's --color-jitter builds it),
//                  with probability jitter_prob (timm's --color-jitter-prob, RandomApply)
//   grayscale_prob:     Pillow's grayscale, with this probability (torchvision's RandomGrayscale)
//   gaussian_blur_prob: torchvision's GaussianBlur(23) of sigma drawn from [0.1, 2], with this
//                       probability (timm's --gaussian-blur-prob)
//   reprob > 0:    random erasing of re_count boxes (1 to re_count of them, each of area
//                  2%-33% over their number, aspect 0.3-3.3) in normalized space: N(0, 1)
//                  noise per pixel, per channel, or zeros (timm's RandomErasing, --remode
//                  pixel, rand or const; --recount)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/dataset.h"
#include "data/pil_ops.h"

namespace vit {

// timm's --aa string. RandAugment: "rand-" and '-'-separated options of a name and a number:
// m (magnitude, 0 to mmax; default 10), n (ops per image; 2), mstd (each op's magnitude drawn
// from N(m, mstd), or uniformly from [0, m] above 100; 0), mmax (the magnitude's upper bound;
// 10; 0 is 10, as timm), p (each op's probability; 0.5), inc (taken as timm takes it, any
// value, inc0 too, as timm's bool of the text: the ops that grow with the magnitude). Or
// 3-Augment: "3a", with mstd as its only option (timm's auto_augment_transform; each op's own
// magnitude, 5 or 10, is the mean). Anything else (w, op weights) is an error naming it: an
// option must not be ignored.
struct AutoAugmentSpec {
  bool three = false;  // "3a"
  float m = 10.f, mstd = 0.f, mmax = 10.f, p = 0.5f;
  int64_t n = 2;
  bool increasing = false;
};
AutoAugmentSpec parse_auto_augment(const std::string& text);

// The taps of --gaussian-blur-prob's blur (timm's, "hardcoded for now" there too).
constexpr int kBlurKernel = 23;

struct AugmentConfig {
  float scale_min = 0.f, scale_max = 1.f;  // random resized crop when scale_min > 0 (timm --scale)
  float ratio_min = 0.75f, ratio_max = 4.f / 3.f;
  int64_t crop_pad = 0;
  std::string crop_fill = "black";  // "black" (torchvision's fill=0) or "mean" (0 once normalized)
  float hflip = 0.f;
  float vflip = 0.f;
  std::string auto_augment;  // "rand-m9-n2": RandAugment, n ops of magnitude m/10; "3a" (timm --aa)
  // What RandAugment's rotations, shears and translations fill with: "mean" (the
  // normalization's, as timm) or "gray" (0.5, what vitcpp filled with before 2026-12-04).
  std::string aa_fill = "mean";
  // RandAugment's ops: "timm" (timm's sets, as Pillow applies them) or "mild" (vitcpp's set
  // before 2026-12-06: no equalize, invert or solarize-add, all growing with the magnitude).
  std::string aa_ops = "timm";
  // Color jitter strengths: brightness, contrast, saturation (timm --color-jitter).
  float jitter[3] = {0, 0, 0};
  float jitter_prob = 1.f;         // the jitter's probability (timm --color-jitter-prob)
  float grayscale_prob = 0.f;      // timm --grayscale-prob
  float gaussian_blur_prob = 0.f;  // timm --gaussian-blur-prob
  float reprob = 0.f;              // random erasing probability (timm --reprob)
  std::string re_mode = "pixel";   // what erasing fills with: pixel, rand or const (timm --remode)
  int64_t re_count = 1;            // at most this many boxes (timm --recount)
  std::vector<float> mean, std;    // the normalization, to apply photometric ops on [0, 1]
  bool active() const {
    return scale_min > 0.f || crop_pad > 0 || hflip > 0.f || vflip > 0.f || reprob > 0.f || photometric();
  }
  bool color_jitter() const { return jitter[0] > 0.f || jitter[1] > 0.f || jitter[2] > 0.f; }
  // The ops that work on pixel values in [0, 1] (the normalization undone around them).
  bool photometric() const {
    return !auto_augment.empty() || color_jitter() || grayscale_prob > 0.f || gaussian_blur_prob > 0.f;
  }
  void validate() const;
};

// torchvision's adjust_brightness, adjust_contrast and adjust_saturation on a [C, H, W] image
// in [0, 1] (C = 1 or 3): the n adjustments order[0..n) (0 brightness, 1 contrast, 2
// saturation), each by its factor in factors[0..2]: a blend with black, with the mean of the
// grayscale image, or with the grayscale image (0.2989 R + 0.587 G + 0.114 B; saturation
// leaves one channel as it is), clamped to [0, 1].
void color_jitter(float* img, int64_t C, int64_t H, int64_t W, const int* order, int n,
                  const float factors[3]);

// One op of the "mild" set (0 identity, 1 auto-contrast, 2 rotate, 3-4 shear x/y, 5-6 translate
// x/y, 7 brightness, 8 contrast, 9 color, 10 solarize, 11 posterize, 12 sharpness) on a
// [C, H, W] image in [0, 1], at signed magnitude m (M/10 of rand-mM); the geometric ops fill
// what comes from outside channel c with fill[c].
void rand_augment_op(int op, float m, float* img, int64_t C, int64_t H, int64_t W, const float* fill);

// timm's RandAugment op argument (LEVEL_TO_ARG, the same order of operations, so the same
// doubles) at magnitude m (0 to mmax) with the sign drawn for it, on an H x W image:
// degrees, bits kept, a threshold, an amount, a factor, a shear or pixels of translation.
double timm_op_arg(PilOp op, bool increasing, double m, double sign, int64_t H, int64_t W);

// The random resized crop's box on an H x W image (torchvision's RandomResizedCrop.get_params).
CropBox random_resized_box(Rng& rng, int64_t H, int64_t W, const AugmentConfig& cfg);

class AugmentedDataset : public Dataset {
 public:
  // repeats > 1: `repeats` samples of each image, sample i + k n the k-th of image i (n the
  // base's size), each with its own draws (repeated augmentation: repeated_epoch_order).
  AugmentedDataset(const Dataset& base, AugmentConfig cfg, uint64_t seed, int64_t repeats = 1);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t size() const override { return base_.size() * repeats_; }
  int64_t num_classes() const override { return base_.num_classes(); }
  int64_t channels() const override { return base_.channels(); }
  int64_t height() const override { return base_.height(); }
  int64_t width() const override { return base_.width(); }
  int64_t get(int64_t i, float* image) const override;
  std::string describe() const override;

 private:
  void three_augment(Rng& rng, float* image, int64_t C, int64_t H, int64_t W) const;
  void erase_box(Rng& rng, float* image, int64_t C, int64_t H, int64_t W, int64_t count) const;
  const Dataset& base_;
  AugmentConfig cfg_;
  uint64_t seed_;
  int64_t repeats_;
  int64_t epoch_ = 0;
  int64_t ra_n_ = 0;  // RandAugment's ops per image, 0 without it (and with 3-Augment)
  AutoAugmentSpec ra_;
  std::vector<float> ra_fill_;  // the geometric ops' fill per channel, in [0, 1]
};

}  // namespace vit
