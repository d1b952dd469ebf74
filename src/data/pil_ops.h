// The Pillow image operations that timm's RandAugment and 3-Augment apply (timm/data/auto_augment.py:
// ImageOps, ImageEnhance, ImageFilter and Image.transform), on [C, H, W] images in [0, 1] read as 8-bit
// pixels (round(255 v)) and written back as such. Each rounds, truncates and clips as Pillow 9
// does, so that a fixture made with Pillow matches pixel for pixel (tests/data/test_data.cpp,
// tools/make_augment_fixtures.py). The geometric ops sample bilinearly (timm draws bilinear or
// bicubic), and a pixel whose source centre falls outside the image takes fill[c].
#pragma once
#include <cstdint>

namespace vit {

enum class PilOp {
  AutoContrast,  // each channel stretched to 0..255 (ImageOps.autocontrast); arg unused
  Equalize,      // histogram equalization per channel (ImageOps.equalize); arg unused
  Invert,        // 255 - v; arg unused
  Rotate,        // counter-clockwise by arg degrees about the centre (Image.rotate)
  Posterize,     // keep the arg high bits (0 to 8)
  Solarize,      // invert the pixels at or above the threshold arg (0 to 256)
  SolarizeAdd,   // add arg to the pixels below 128, capped at 255
  Color,         // blend with the grayscale image by the factor arg (ImageEnhance.Color)
  Contrast,      // blend with the grayscale mean (ImageEnhance.Contrast)
  Brightness,    // blend with black (ImageEnhance.Brightness)
  Sharpness,     // blend with the 3x3 smoothed image (ImageEnhance.Sharpness)
  ShearX,        // x' = x + arg y (Image.AFFINE (1, arg, 0, 0, 1, 0))
  ShearY,        // y' = y + arg x
  TranslateX,    // x' = x + arg pixels
  TranslateY,    // y' = y + arg pixels
  Grayscale,     // convert("L") and back: each pixel's luma in every channel; arg unused
  GaussianBlur,  // ImageFilter.GaussianBlur(radius=arg): three box blurs each way, edges repeated
};

void pil_op(PilOp op, double arg, float* img, int64_t C, int64_t H, int64_t W, const float* fill);

// torchvision's GaussianBlur(kernel, sigma) on an 8-bit image, as timm's --gaussian-blur-prob
// applies it (after Pillow's ops, before the tensor): the image read as 8-bit pixels, convolved
// in float with the separable Gaussian of `kernel` taps (odd), padded by reflection (so H and
// W must exceed kernel / 2), rounded back to 8-bit.
void tv_gaussian_blur(float* img, int64_t C, int64_t H, int64_t W, int kernel, double sigma);

}  // namespace vit
