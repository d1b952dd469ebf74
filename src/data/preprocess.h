// How an image file becomes the model's input, as timm's eval transform and Hugging Face's
// ViTImageProcessor do it with Pillow (so the same file gives the same tensor):
//   1. convert to the model's channels (alpha dropped, gray replicated: Pillow's convert);
//   2. resize with Pillow's 8-bit resampling (antialiased when shrinking):
//        crop_mode "center": the shorter side to floor(size / crop_pct), aspect kept
//          (torchvision's Resize(int); timm's ResizeKeepRatio for non-square inputs);
//        crop_mode "squash": each side to floor(size / crop_pct) (HF: crop_pct 1);
//   3. center crop to the input size (torchvision's CenterCrop, its rounding included);
//   4. x = (pixel / 255 - mean[c]) / std[c] in float32 (ToTensor + Normalize).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace vit {

struct InputSpec {
  int64_t channels = 3, height = 224, width = 224;
  std::vector<float> mean, std;
  std::string interpolation =
      "bilinear";                    // Pillow's filters: bilinear, bicubic, lanczos, box, hamming, nearest
  double crop_pct = 1.0;             // in (0, 1]; timm's Python float
  std::string crop_mode = "squash";  // "center" or "squash"
  void validate() const;
};

// The size the image is resized to before the center crop, {height, width}.
std::pair<int64_t, int64_t> resized_size(int64_t h, int64_t w, const InputSpec& in);
// The filter the resize uses: in.interpolation, except where timm's eval transform uses
// bilinear whatever its config says (a center crop to a non-square size).
const std::string& resize_filter(const InputSpec& in);
// Steps 2-3 on 8-bit pixels: [in.height, in.width, img.c].
Image resize_and_crop(const Image& img, const InputSpec& in);
// All four steps: out[C, H, W].
void preprocess_image(const Image& img, const InputSpec& in, float* out);
// Training's random resized crop of a decoded image: the box of img (CropBox, data/image.h),
// resized to the input size with Pillow's bilinear filter (antialiased when shrinking:
// torchvision's resized_crop of a PIL image, RandomResizedCrop's default), then steps 1 and 4.
void preprocess_crop(const Image& img, const CropBox& box, const InputSpec& in, float* out);
// Decodes one image file and preprocesses it (errors name the file); returns the decoded image
// (vit attention draws it: a file read twice could not be standard input).
Image load_image_input(const std::string& path, const InputSpec& in, float* out);
// The same for PNG/JPEG bytes in memory (errors start "encoded image: "), and for 8-bit pixels
// hwc[h, w, c] with c 1 (gray), 3 (RGB) or 4 (RGBA) (errors start "pixels: "; sizes whose
// byte count overflows are refused before anything is read).
void preprocess_encoded(const uint8_t* data, size_t size, const InputSpec& in, float* out);
void preprocess_pixels(const uint8_t* hwc, int64_t h, int64_t w, int64_t c, const InputSpec& in, float* out);

}  // namespace vit
