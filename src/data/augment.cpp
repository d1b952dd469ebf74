#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/decimal.h"
#include "core/rng.h"
#include "data/image.h"
#include "data/pil_ops.h"

namespace vit {

void AugmentConfig::validate() const {
  VIT_VALUE_CHECK(scale_min >= 0.f && scale_min <= scale_max && scale_max <= 1.f,
                  "--scale must satisfy 0 <= min <= max <= 1");
  VIT_VALUE_CHECK(ratio_min > 0.f && ratio_min <= ratio_max, "--ratio must satisfy 0 < min <= max");
  VIT_VALUE_CHECK(crop_pad >= 0 && crop_pad <= (1 << 20), "--crop-pad must be in [0, 2^20] pixels, got ",
                  crop_pad);
  VIT_VALUE_CHECK(crop_fill == "black" || crop_fill == "mean", "--crop-fill: expected black or mean, got '",
                  crop_fill, "'");
  VIT_VALUE_CHECK(aa_fill == "mean" || aa_fill == "gray", "--aa-fill: expected mean or gray, got '", aa_fill,
                  "'");
  VIT_VALUE_CHECK(aa_ops == "timm" || aa_ops == "mild", "--aa-ops: expected timm or mild, got '", aa_ops,
                  "'");
  VIT_VALUE_CHECK(hflip >= 0.f && hflip <= 1.f, "--hflip must be a probability");
  VIT_VALUE_CHECK(vflip >= 0.f && vflip <= 1.f, "--vflip must be a probability");
  VIT_VALUE_CHECK(reprob >= 0.f && reprob <= 1.f, "--reprob must be a probability");
  VIT_VALUE_CHECK(re_mode == "pixel" || re_mode == "rand" || re_mode == "const",
                  "--remode: expected pixel, rand or const, got '", re_mode, "'");
  VIT_VALUE_CHECK(re_count >= 1 && re_count <= 1000, "--recount must be 1 to 1000 boxes, got ", re_count);
  VIT_VALUE_CHECK(jitter_prob >= 0.f && jitter_prob <= 1.f, "--color-jitter-prob must be a probability");
  VIT_VALUE_CHECK(grayscale_prob >= 0.f && grayscale_prob <= 1.f, "--grayscale-prob must be a probability");
  VIT_VALUE_CHECK(gaussian_blur_prob >= 0.f && gaussian_blur_prob <= 1.f,
                  "--gaussian-blur-prob must be a probability");
  for (float j : jitter)
    VIT_VALUE_CHECK(j >= 0.f && std::isfinite(j), "--color-jitter must be non-negative, got ", j);
}

AutoAugmentSpec parse_auto_augment(const std::string& text) {
  AutoAugmentSpec s;
  if (text.rfind("3a", 0) == 0) {  // timm's auto_augment_transform: the policy, then mstd only
    s.three = true;
    VIT_VALUE_CHECK(text == "3a" || text.rfind("3a-mstd", 0) == 0, "--aa ", text,
                    ": 3-Augment takes one option, mstd (3a or 3a-mstd0.5)");
    if (text != "3a") {
      char* stop = nullptr;
      const double v = std::strtod(text.c_str() + 7, &stop);
      VIT_VALUE_CHECK(stop != text.c_str() + 7 && *stop == '\0' && std::isfinite(v) && v >= 0, "--aa ", text,
                      ": mstd must be a number >= 0");
      s.mstd = float(v);
    }
    return s;
  }
  const std::string usage = "--aa " + text +
                            ": expected 3a (3-Augment), or rand- and options such as m9-n2-mstd0.5 (m "
                            "magnitude, n ops, mstd magnitude noise, mmax, p probability, inc)";
  VIT_VALUE_CHECK(text.rfind("rand-", 0) == 0 && text.size() > 5, usage);
  size_t at = 5;
  while (at <= text.size()) {
    const size_t end = std::min(text.find('-', at), text.size());
    const std::string part = text.substr(at, end - at);
    const size_t digits = part.find_first_of("0123456789.");
    VIT_VALUE_CHECK(digits != std::string::npos && digits > 0, usage, " (at '", part, "')");
    const std::string key = part.substr(0, digits), value = part.substr(digits);
    char* stop = nullptr;
    const double v = std::strtod(value.c_str(), &stop);
    VIT_VALUE_CHECK(*stop == '\0' && std::isfinite(v) && v >= 0, usage, " (at '", part, "': not a number)");
    if (key == "m") {
      s.m = float(v);
    } else if (key == "n") {
      VIT_VALUE_CHECK(v >= 1 && v <= 100 && v == std::floor(v), "--aa ", text,
                      ": n (ops per image) must be 1 to 100");
      s.n = int64_t(v);
    } else if (key == "mstd") {
      s.mstd = float(v);
    } else if (key == "mmax") {
      s.mmax = v > 0 ? float(v) : 10.f;  // timm: `magnitude_max or 10`
    } else if (key == "p") {
      VIT_VALUE_CHECK(v <= 1, "--aa ", text, ": p (each op's probability) must be at most 1");
      s.p = float(v);
    } else if (key == "inc") {
      s.increasing = true;  // timm reads any inc value as true (bool of the text "0")
    } else if (key == "w") {
      throw Error("--aa " + text +
                  ": w (op weights, which timm dropped too) is not implemented; every op is equally likely");
    } else {
      throw Error(usage + " (unknown option '" + key + "')");
    }
    at = end + 1;
  }
  // timm holds the magnitude to [0, mmax] silently; a magnitude above it is refused here, so
  // that "rand-m15" is not quietly rand-m10 (write mmax15 to mean 15).
  VIT_VALUE_CHECK(s.m <= s.mmax, "--aa ", text, ": magnitude ", s.m, " is above mmax ", s.mmax,
                  " (timm would hold it to ", s.mmax, "; add -mmax", s.m, " for ", s.m, ")");
  return s;
}

AugmentedDataset::AugmentedDataset(const Dataset& base, AugmentConfig cfg, uint64_t seed, int64_t repeats)
    : base_(base), cfg_(std::move(cfg)), seed_(seed), repeats_(repeats) {
  cfg_.validate();
  VIT_CHECK(repeats >= 1, "augmentation repeats must be at least 1, got ", repeats);
  if (cfg_.crop_pad > 0 && cfg_.crop_fill == "black" && !cfg_.mean.empty())  // black = -mean / std
    VIT_CHECK(int64_t(cfg_.mean.size()) == base_.channels() && cfg_.std.size() == cfg_.mean.size(),
              "--crop-fill black: the normalization has ", cfg_.mean.size(), " mean values for ",
              base_.channels(), " channels");
  if (!cfg_.auto_augment.empty()) {
    ra_ = parse_auto_augment(cfg_.auto_augment);
    ra_n_ = ra_.three ? 0 : ra_.n;
  }
  // timm's fill for the geometric ops: the normalization's mean as 8-bit pixels (create_transform's
  // img_mean), here back in [0, 1]; or the 0.5 gray of runs recorded before.
  for (float m : cfg_.mean)
    ra_fill_.push_back(
        cfg_.aa_fill == "gray"
            ? 0.5f
            // timm: min(255, round(255 * x)), Python's round (half to even) of the
            // mean as written (0.3, not float's 0.30000001: 76, not 77).
            : float(std::min(255.0, std::nearbyint(255.0 * std::max(0.0, shortest_decimal(m))))) / 255.f);
  const char* photometric = !cfg_.auto_augment.empty()  ? "--aa"
                            : cfg_.color_jitter()       ? "--color-jitter"
                            : cfg_.grayscale_prob > 0.f ? "--grayscale-prob"
                                                        : "--gaussian-blur-prob";
  if (cfg_.photometric())  // these ops work on [0, 1] values
    VIT_CHECK(int64_t(cfg_.mean.size()) == base_.channels() && int64_t(cfg_.std.size()) == base_.channels(),
              photometric, " needs the normalization's mean and std");
  const bool gray_ops = cfg_.color_jitter() || cfg_.grayscale_prob > 0.f || ra_.three;
  VIT_CHECK(!gray_ops || base_.channels() == 1 || base_.channels() == 3,
            cfg_.color_jitter() ? "--color-jitter"
            : ra_.three         ? "--aa 3a"
                                : "--grayscale-prob",
            " takes images of 1 or 3 channels, not ", base_.channels());
  // torchvision pads the 23-tap kernel by reflection, which needs more than 11 pixels a side.
  VIT_CHECK(
      cfg_.gaussian_blur_prob == 0.f || (base_.height() > kBlurKernel / 2 && base_.width() > kBlurKernel / 2),
      "--gaussian-blur-prob: torchvision's ", kBlurKernel, "-tap blur needs images over ", kBlurKernel / 2,
      " pixels a side, not ", base_.height(), " x ", base_.width());
}

namespace {

// Samples each plane c (H x W) at the points map(y, x) gives, bilinearly; outside gets fill[c].
template <typename Map>
void warp(float* img, int64_t C, int64_t H, int64_t W, const float* fill, Map map) {
  thread_local std::vector<float> src;
  src.assign(img, img + C * H * W);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      auto [sy, sx] = map(double(y), double(x));
      const int64_t y0 = int64_t(std::floor(sy)), x0 = int64_t(std::floor(sx));
      const float wy = float(sy - y0), wx = float(sx - x0);
      for (int64_t c = 0; c < C; ++c) {
        const float* s = src.data() + c * H * W;
        auto at = [&](int64_t yy, int64_t xx) {
          return yy < 0 || yy >= H || xx < 0 || xx >= W ? fill[c] : s[yy * W + xx];
        };
        img[(c * H + y) * W + x] = (at(y0, x0) * (1 - wx) + at(y0, x0 + 1) * wx) * (1 - wy) +
                                   (at(y0 + 1, x0) * (1 - wx) + at(y0 + 1, x0 + 1) * wx) * wy;
      }
    }
}

}  // namespace

namespace {
// The factor of brightness, contrast, color and sharpness at signed magnitude m: 1 + 0.9 m,
// at least 0.1 as timm's (reached only past magnitude 10, with mmax above it).
float enhance(float m) {
  return std::max(0.1f, 1.f + 0.9f * m);
}
}  // namespace

void rand_augment_op(int op, float m, float* img, int64_t C, int64_t H, int64_t W, const float* fill) {
  const int64_t n = C * H * W;
  const double cy = (H - 1) / 2.0, cx = (W - 1) / 2.0;
  switch (op) {
    case 0: break;  // identity
    case 1:         // auto-contrast per channel
      for (int64_t c = 0; c < C; ++c) {
        float* p = img + c * H * W;
        const auto [lo, hi] = std::minmax_element(p, p + H * W);
        const float l = *lo, r = *hi - *lo;
        if (r > 1e-6f)
          for (int64_t i = 0; i < H * W; ++i) p[i] = (p[i] - l) / r;
      }
      break;
    case 2: {  // rotate by up to 30 degrees
      const double a = m * 30.0 * M_PI / 180.0, ca = std::cos(a), sa = std::sin(a);
      warp(img, C, H, W, fill, [&](double y, double x) {
        return std::pair{cy + (y - cy) * ca - (x - cx) * sa, cx + (y - cy) * sa + (x - cx) * ca};
      });
      break;
    }
    case 3:
      warp(img, C, H, W, fill, [&](double y, double x) { return std::pair{y, x + m * 0.3 * (y - cy)}; });
      break;
    case 4:
      warp(img, C, H, W, fill, [&](double y, double x) { return std::pair{y + m * 0.3 * (x - cx), x}; });
      break;
    case 5:
      warp(img, C, H, W, fill, [&](double y, double x) { return std::pair{y, x + m * 0.45 * W}; });
      break;
    case 6:
      warp(img, C, H, W, fill, [&](double y, double x) { return std::pair{y + m * 0.45 * H, x}; });
      break;
    case 7:  // brightness
      for (int64_t i = 0; i < n; ++i) img[i] *= enhance(m);
      break;
    case 8: {  // contrast around the mean
      double mean = 0;
      for (int64_t i = 0; i < n; ++i) mean += img[i];
      mean /= double(n);
      for (int64_t i = 0; i < n; ++i) img[i] = float(mean + (img[i] - mean) * enhance(m));
      break;
    }
    case 9:  // color (saturation): blend with the per-pixel gray
      if (C == 3)
        for (int64_t i = 0; i < H * W; ++i) {
          const float g = 0.299f * img[i] + 0.587f * img[H * W + i] + 0.114f * img[2 * H * W + i];
          for (int64_t c = 0; c < 3; ++c) img[c * H * W + i] = g + (img[c * H * W + i] - g) * enhance(m);
        }
      break;
    case 10: {  // solarize: invert above a threshold that falls with the magnitude
      const float t = 1.f - std::fabs(m) / 3.f;
      for (int64_t i = 0; i < n; ++i)
        if (img[i] >= t) img[i] = 1.f - img[i];
      break;
    }
    case 11: {  // posterize: keep 8 - 4|m|/3 bits... at least 4
      const int bits = std::max(4, 8 - int(std::lround(4 * std::fabs(m) / 3.f)));
      const float levels = float(1 << bits) - 1.f;
      for (int64_t i = 0; i < n; ++i) img[i] = std::round(std::clamp(img[i], 0.f, 1.f) * levels) / levels;
      break;
    }
    case 12: {  // sharpness: blend with a 3x3 smoothed copy
      thread_local std::vector<float> src;
      src.assign(img, img + n);
      const float f = enhance(m);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 1; y + 1 < H; ++y)
          for (int64_t x = 1; x + 1 < W; ++x) {
            const float* s = src.data() + c * H * W;
            float blur = 5 * s[y * W + x];
            for (int dy = -1; dy <= 1; ++dy)
              for (int dx = -1; dx <= 1; ++dx) blur += s[(y + dy) * W + x + dx];
            blur /= 13.f;  // PIL's SMOOTH kernel: center 5, neighbours 1
            img[(c * H + y) * W + x] = blur + (s[y * W + x] - blur) * f;
          }
      break;
    }
  }
}

namespace {

// torchvision's _blend: r a + (1 - r) b, clamped to [0, 1].
float blend(float a, float b, float r) {
  return std::clamp(r * a + (1.f - r) * b, 0.f, 1.f);
}

}  // namespace

void color_jitter(float* img, int64_t C, int64_t H, int64_t W, const int* order, int n,
                  const float factors[3]) {
  const int64_t hw = H * W;
  auto gray = [&](int64_t i) { return 0.2989f * img[i] + 0.587f * img[hw + i] + 0.114f * img[2 * hw + i]; };
  for (int k = 0; k < n; ++k) {
    const float f = factors[order[k]];
    switch (order[k]) {
      case 0:
        for (int64_t i = 0; i < C * hw; ++i) img[i] = blend(img[i], 0.f, f);
        break;
      case 1: {
        double sum = 0;
        for (int64_t i = 0; i < hw; ++i) sum += C == 3 ? gray(i) : img[i];
        const float mean = float(sum / double(hw));
        for (int64_t i = 0; i < C * hw; ++i) img[i] = blend(img[i], mean, f);
        break;
      }
      case 2:
        if (C == 3)
          for (int64_t i = 0; i < hw; ++i) {
            const float g = gray(i);
            for (int64_t c = 0; c < 3; ++c) img[c * hw + i] = blend(img[c * hw + i], g, f);
          }
        break;
    }
  }
}

CropBox random_resized_box(Rng& rng, int64_t H, int64_t W, const AugmentConfig& cfg) {
  // torchvision's RandomResizedCrop.get_params: 10 tries of an area share and a log-uniform
  // aspect, each side rounded as Python's round (half to even).
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = double(H * W) * (cfg.scale_min + (cfg.scale_max - cfg.scale_min) * rng.uniform());
    const double lr =
        std::log(cfg.ratio_min) + (std::log(cfg.ratio_max) - std::log(cfg.ratio_min)) * rng.uniform();
    const auto w = int64_t(std::nearbyint(std::sqrt(area * std::exp(lr)))),
               h = int64_t(std::nearbyint(std::sqrt(area / std::exp(lr))));
    if (w >= 1 && h >= 1 && w <= W && h <= H) {
      const auto y = int64_t(rng.below(uint64_t(H - h + 1)));
      return {y, int64_t(rng.below(uint64_t(W - w + 1))), h, w};
    }
  }
  // Then the central crop, its aspect held to the ratio range.
  const double in_ratio = double(W) / double(H);
  int64_t h = H, w = W;
  if (in_ratio < cfg.ratio_min)
    h = std::max<int64_t>(1, std::min(H, int64_t(std::nearbyint(double(W) / cfg.ratio_min))));
  else if (in_ratio > cfg.ratio_max)
    w = std::max<int64_t>(1, std::min(W, int64_t(std::nearbyint(double(H) * cfg.ratio_max))));
  return {(H - h) / 2, (W - w) / 2, h, w};
}

namespace {

// timm's RandAugment ops in its order (_RAND_TRANSFORMS; with inc, _RAND_INCREASING_TRANSFORMS:
// the same ops, posterize, solarize and the four enhancements growing with the magnitude).
constexpr PilOp kTimmOps[] = {PilOp::AutoContrast, PilOp::Equalize,   PilOp::Invert,      PilOp::Rotate,
                              PilOp::Posterize,    PilOp::Solarize,   PilOp::SolarizeAdd, PilOp::Color,
                              PilOp::Contrast,     PilOp::Brightness, PilOp::Sharpness,   PilOp::ShearX,
                              PilOp::ShearY,       PilOp::TranslateX, PilOp::TranslateY};

}  // namespace

double timm_op_arg(PilOp op, bool increasing, double m, double sign, int64_t H, int64_t W) {
  const double level = m / 10.0;
  switch (op) {
    case PilOp::Rotate: return sign * (level * 30.0);
    case PilOp::Posterize:  // bits kept: 0-4 growing with m, or 4-0 (inc)
      return increasing ? 4 - int(level * 4) : int(level * 4);
    case PilOp::Solarize:  // the threshold: 0-256, or 256-0 (inc)
      return increasing ? 256 - int(level * 256) : int(level * 256);
    case PilOp::SolarizeAdd:  // 0-110, at most 128 past magnitude 10
      return std::min(128, int(level * 110));
    case PilOp::Color:
    case PilOp::Contrast:
    case PilOp::Brightness:
    case PilOp::Sharpness:  // the factor: 0.1-1.9, or 1 -+ 0.9 level held to 0.1 (inc)
      return increasing ? std::max(0.1, 1.0 + sign * (level * 0.9)) : level * 1.8 + 0.1;
    case PilOp::ShearX:
    case PilOp::ShearY: return sign * (level * 0.3);
    case PilOp::TranslateX:  // 45% of the side at magnitude 10, in pixels
      return sign * (level * 0.45) * double(W);
    case PilOp::TranslateY: return sign * (level * 0.45) * double(H);
    default: return 0;
  }
}

// timm's 3-Augment policy (auto_augment_policy_3a): one of its three ops, each applied, its
// magnitude noised only with mstd (N(m, mstd) held to [0, 10]):
//   solarize at magnitude 5 (threshold int(m / 10 * 256): 128);
//   desaturate at 10: ImageEnhance.Color by 1 - (0.5 + 0.5 m / 10) held to [0, 1] (0: gray);
//   a Pillow Gaussian blur at 10, of radius uniform in [0.1, 2 m / 10].
void AugmentedDataset::three_augment(Rng& rng, float* image, int64_t C, int64_t H, int64_t W) const {
  const auto op = rng.below(3);
  double m = op == 0 ? 5.0 : 10.0;
  if (ra_.mstd > 0.f) m = std::clamp(m + ra_.mstd * rng.normal(), 0.0, 10.0);
  const double level = m / 10.0;
  if (op == 0)
    pil_op(PilOp::Solarize, timm_op_arg(PilOp::Solarize, false, m, 1.0, H, W), image, C, H, W, nullptr);
  else if (op == 1)
    pil_op(PilOp::Color, std::clamp(1.0 - (0.5 + 0.5 * level), 0.0, 1.0), image, C, H, W, nullptr);
  else  // Python's random.uniform(a, b): a + (b - a) random()
    pil_op(PilOp::GaussianBlur, 0.1 + (2.0 * level - 0.1) * rng.uniform(), image, C, H, W, nullptr);
}

// One box of timm's RandomErasing: 10 tries of an area share in [2%, 33%] over the boxes'
// count and an aspect log-uniform in [0.3, 3.3]; the first that fits is filled in normalized
// space with N(0, 1) per pixel (pixel), per channel (rand) or zeros (const). A box that rounds
// to no pixels fits for timm, which then erases nothing; with one box it is tried again, as
// vitcpp did before --recount (runs keep their draws).
void AugmentedDataset::erase_box(Rng& rng, float* image, int64_t C, int64_t H, int64_t W,
                                 int64_t count) const {
  const bool per_pixel = cfg_.re_mode == "pixel", per_channel = cfg_.re_mode == "rand";
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = H * W * (0.02 + (1.0 / 3.0 - 0.02) * rng.uniform()) / double(count);
    const double lr = std::log(0.3) + (std::log(1 / 0.3) - std::log(0.3)) * rng.uniform();
    const int64_t h = int64_t(std::round(std::sqrt(area * std::exp(lr))));
    const int64_t w = int64_t(std::round(std::sqrt(area / std::exp(lr))));
    if (h >= H || w >= W || ((h < 1 || w < 1) && count == 1)) continue;
    const int64_t y0 = int64_t(rng.below(uint64_t(H - h + 1))), x0 = int64_t(rng.below(uint64_t(W - w + 1)));
    if (h < 1 || w < 1) return;  // timm's empty box
    for (int64_t c = 0; c < C; ++c) {
      const float fill = per_channel ? float(rng.normal()) : 0.f;
      for (int64_t y = y0; y < y0 + h; ++y)
        for (int64_t x = x0; x < x0 + w; ++x)
          image[(c * H + y) * W + x] = per_pixel ? float(rng.normal()) : fill;
    }
    return;
  }
}

int64_t AugmentedDataset::get(int64_t i, float* image) const {
  const int64_t C = channels(), H = height(), W = width(), n = C * H * W;
  Rng rng(rng_key(seed_, uint64_t(epoch_), uint64_t(i)));  // a repeat's key is its own
  const int64_t image_index = i % base_.size();
  int64_t label = -1;
  if (cfg_.scale_min > 0.f)  // image folders: the box drawn on the decoded file
    label = base_.get_crop(
        image_index, [&](int64_t h, int64_t w) { return random_resized_box(rng, h, w, cfg_); }, image);
  if (label < 0) {
    label = base_.get(image_index, image);
    if (cfg_.scale_min > 0.f) {
      // Random resized crop of the sample: the box resized to H x W. Half-pixel centres
      // clamped to the box, as resizing the cropped box repeats its edges (nothing filled).
      const CropBox b = random_resized_box(rng, H, W, cfg_);
      const double by = double(b.y), bx = double(b.x), bh = double(b.h), bw = double(b.w);
      thread_local std::vector<float> unused;
      unused.assign(size_t(C), 0.f);
      warp(image, C, H, W, unused.data(), [&](double y, double x) {
        return std::pair{std::clamp(by + (y + 0.5) * bh / H - 0.5, by, by + bh - 1),
                         std::clamp(bx + (x + 0.5) * bw / W - 0.5, bx, bx + bw - 1)};
      });
    }
  }
  if (cfg_.crop_pad > 0) {
    const int64_t p = cfg_.crop_pad;
    // Offsets of the crop inside the padded image, in [0, 2p]; shift = offset - p.
    const int64_t dy = int64_t(rng.below(2 * p + 1)) - p, dx = int64_t(rng.below(2 * p + 1)) - p;
    thread_local std::vector<float> src;
    src.assign(image, image + n);
    for (int64_t c = 0; c < C; ++c) {
      // Black is pixel value 0 after normalization; without one the values are pixels already.
      const float fill = cfg_.crop_fill == "mean" || cfg_.mean.empty() ? 0.f : -cfg_.mean[c] / cfg_.std[c];
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t sy = y + dy, sx = x + dx;
          image[(c * H + y) * W + x] =
              (sy >= 0 && sy < H && sx >= 0 && sx < W) ? src[(c * H + sy) * W + sx] : fill;
        }
    }
  }
  if (cfg_.hflip > 0.f && rng.uniform() < cfg_.hflip)
    for (int64_t r = 0; r < C * H; ++r)
      for (int64_t x = 0; x < W / 2; ++x) std::swap(image[r * W + x], image[r * W + W - 1 - x]);
  // Drawn only when asked for, so that runs without it keep their draws.
  if (cfg_.vflip > 0.f && rng.uniform() < cfg_.vflip)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H / 2; ++y)
        std::swap_ranges(image + (c * H + y) * W, image + (c * H + y + 1) * W,
                         image + (c * H + H - 1 - y) * W);
  if (cfg_.photometric()) {
    for (int64_t c = 0; c < C; ++c)  // to [0, 1]
      for (int64_t k = 0; k < H * W; ++k)
        image[c * H * W + k] = image[c * H * W + k] * cfg_.std[c] + cfg_.mean[c];
    // timm's ops work on the 8-bit image Pillow holds; the mild ones on the values as they are.
    const bool timm_ops = (ra_n_ > 0 && cfg_.aa_ops == "timm") || ra_.three;
    if (timm_ops)
      for (int64_t k = 0; k < n; ++k) image[k] = std::round(std::clamp(image[k], 0.f, 1.f) * 255.f) / 255.f;
    for (int64_t k = 0; k < ra_n_; ++k) {
      const int op = int(rng.below(timm_ops ? std::size(kTimmOps) : 13));
      const bool apply = rng.uniform() < ra_.p;
      const float sign = rng.uniform() < 0.5 ? -1.f : 1.f;
      if (!apply) continue;
      // timm's AugmentOp: the magnitude drawn per op (only with mstd, so that runs without it
      // keep their draws), then held to [0, mmax].
      double m = ra_.m;
      if (ra_.mstd > 100.f)
        m = ra_.m * rng.uniform();
      else if (ra_.mstd > 0.f)
        m = ra_.m + ra_.mstd * rng.normal();
      m = std::clamp(m, 0.0, double(ra_.mmax));
      if (timm_ops)
        pil_op(kTimmOps[op], timm_op_arg(kTimmOps[op], ra_.increasing, m, sign, H, W), image, C, H, W,
               ra_fill_.data());
      else
        rand_augment_op(op, sign * (float(m) / 10.f), image, C, H, W, ra_fill_.data());
    }
    if (ra_.three) three_augment(rng, image, C, H, W);
    // After RandAugment, as timm orders them when both are on; RandomApply's draw only with
    // --color-jitter-prob, so that runs without it keep their draws.
    if (cfg_.color_jitter() && (cfg_.jitter_prob >= 1.f || rng.uniform() < cfg_.jitter_prob)) {
      // The adjustments asked for (strength > 0), in a random order, each with its factor.
      int order[3], n_ops = 0;
      for (int k = 0; k < 3; ++k)
        if (cfg_.jitter[k] > 0.f) order[n_ops++] = k;
      for (int k = n_ops - 1; k > 0; --k) std::swap(order[k], order[rng.below(uint64_t(k) + 1)]);
      float factors[3] = {1.f, 1.f, 1.f};
      for (int k = 0; k < 3; ++k)
        if (const float s = cfg_.jitter[k]; s > 0.f) {
          const float lo = std::max(0.f, 1.f - s);
          factors[k] = lo + (1.f + s - lo) * float(rng.uniform());
        }
      color_jitter(image, C, H, W, order, n_ops, factors);
    }
    // timm's SimCLR-like ops, on the 8-bit image as PIL holds it after the jitter.
    if (cfg_.grayscale_prob > 0.f && rng.uniform() < cfg_.grayscale_prob)
      pil_op(PilOp::Grayscale, 0, image, C, H, W, nullptr);
    if (cfg_.gaussian_blur_prob > 0.f && rng.uniform() < cfg_.gaussian_blur_prob)
      // torchvision's sigma: a float32 uniform in [0.1, 2].
      tv_gaussian_blur(image, C, H, W, kBlurKernel, double(0.1f + 1.9f * float(rng.uniform())));
    for (int64_t c = 0; c < C; ++c)  // back to normalized, clamped to the valid range
      for (int64_t k = 0; k < H * W; ++k)
        image[c * H * W + k] = (std::clamp(image[c * H * W + k], 0.f, 1.f) - cfg_.mean[c]) / cfg_.std[c];
  }
  if (cfg_.reprob > 0.f && rng.uniform() < cfg_.reprob) {
    // timm's random.randint(1, recount) boxes, drawn only with --recount, so that runs
    // without it keep their draws.
    const int64_t count = cfg_.re_count > 1 ? 1 + int64_t(rng.below(uint64_t(cfg_.re_count))) : 1;
    for (int64_t box = 0; box < count; ++box) erase_box(rng, image, C, H, W, count);
  }
  return label;
}

std::string AugmentedDataset::describe() const {
  return base_.describe();
}

}  // namespace vit
