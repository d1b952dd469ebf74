#include "data/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/resample.h"
#include "data/image.h"

namespace vit {

void InputSpec::validate() const {
  VIT_CHECK(channels > 0 && height > 0 && width > 0, "input: size ", channels, "x", height, "x", width,
            " must be positive");
  VIT_CHECK(int64_t(mean.size()) == channels && int64_t(std.size()) == channels,
            "input: mean and std need one value per channel (", channels, ")");
  for (float s : std) VIT_CHECK(s > 0.f, "input: std values must be positive, got ", s);
  filter_from_name(interpolation);
  VIT_CHECK(crop_pct > 0 && crop_pct <= 1, "input: crop_pct must be in (0, 1], got ", crop_pct);
  VIT_CHECK(crop_mode == "center" || crop_mode == "squash",
            "input: crop_mode must be 'center' or 'squash', got '", crop_mode, "'");
}

std::pair<int64_t, int64_t> resized_size(int64_t h, int64_t w, const InputSpec& in) {
  // timm: scale_size = floor(size / crop_pct) per side.
  const int64_t sh = scale_size(in.height, in.crop_pct), sw = scale_size(in.width, in.crop_pct);
  // A tiny crop_pct scales the image up before the crop: held to the decoder's pixel limit
  // (and the sides to what an int64 holds).
  const double side = double(std::max(sh, sw)),
               aspect = double(std::max(h, w)) / double(std::max<int64_t>(1, std::min(h, w)));
  const double area = in.crop_mode == "squash" ? double(sh) * double(sw) : side * side * aspect;  // at most
  VIT_CHECK(max_image_pixels() == 0 || area <= double(max_image_pixels()), "resize: crop_pct ", in.crop_pct,
            " scales a ", w, "x", h, " image past the ", max_image_pixels(),
            "-pixel limit (VIT_MAX_IMAGE_PIXELS) before the ", in.width, "x", in.height,
            " crop; timm's crop_pct is 0.75 to 1");
  if (in.crop_mode == "squash") return {sh, sw};
  if (sh == sw) {
    // torchvision's Resize(int): the shorter side to s, the longer to int(s * long / short).
    if (w <= h) return {int64_t(double(sh) * double(h) / double(w)), sh};
    return {sh, int64_t(double(sh) * double(w) / double(h))};
  }
  // timm's ResizeKeepRatio (longest = 0): one ratio for both sides, Python's round.
  const double ratio = std::min(double(h) / double(sh), double(w) / double(sw));
  return {int64_t(std::nearbyint(h / ratio)), int64_t(std::nearbyint(w / ratio))};
}

const std::string& resize_filter(const InputSpec& in) {
  // timm's eval transform gives ResizeKeepRatio (center crop to a non-square size) no
  // interpolation, so that path is bilinear whatever the config says (timm 1.0.29's
  // transforms_factory.py, checked against timm itself by tools/check_with_libraries.py).
  static const std::string bilinear = "bilinear";
  const bool keep_ratio =
      in.crop_mode == "center" && scale_size(in.height, in.crop_pct) != scale_size(in.width, in.crop_pct);
  return keep_ratio ? bilinear : in.interpolation;
}

Image resize_and_crop(const Image& img, const InputSpec& in) {
  const auto [rh, rw] = resized_size(img.h, img.w, in);
  VIT_CHECK(rh >= in.height && rw >= in.width, "resize: ", img.w, "x", img.h, " -> ", rw, "x", rh,
            " is smaller than the ", in.width, "x", in.height, " input");
  Image big{rh, rw, img.c, std::vector<uint8_t>(rh * rw * img.c)};
  if (rh == img.h && rw == img.w)  // Pillow's resize to the same size is a copy
    big.px = img.px;
  else
    resize_u8_pil(img.px.data(), img.h, img.w, img.c, big.px.data(), rh, rw,
                  filter_from_name(resize_filter(in)));
  if (rh == in.height && rw == in.width) return big;
  // torchvision's CenterCrop: int(round((size - crop) / 2.0)), round half to even.
  const int64_t top = int64_t(std::nearbyint((rh - in.height) / 2.0));
  const int64_t left = int64_t(std::nearbyint((rw - in.width) / 2.0));
  Image out{in.height, in.width, img.c, std::vector<uint8_t>(in.height * in.width * img.c)};
  for (int64_t y = 0; y < in.height; ++y)
    std::copy_n(big.px.data() + ((top + y) * rw + left) * img.c, in.width * img.c,
                out.px.data() + y * in.width * img.c);
  return out;
}

namespace {
// Step 4: 8-bit pixels at the input size, [H, W, C], to out[C, H, W].
void normalize(const Image& sized, const InputSpec& in, float* out) {
  const int64_t C = in.channels, plane = in.height * in.width;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < plane; ++i)
      out[c * plane + i] = (float(sized.px[i * C + c]) / 255.f - in.mean[c]) / in.std[c];
}
}  // namespace

void preprocess_image(const Image& img, const InputSpec& in, float* out) {
  const Image rgb = convert_channels(img, in.channels);
  // timm's eval transform whatever the image's size: an image already at the input size is
  // still resized to size / crop_pct and centre-cropped (an identity only when crop_pct is 1).
  normalize(resize_and_crop(rgb, in), in, out);
}

void preprocess_crop(const Image& img, const CropBox& box, const InputSpec& in, float* out) {
  VIT_CHECK(
      box.h > 0 && box.w > 0 && box.y >= 0 && box.x >= 0 && box.y + box.h <= img.h && box.x + box.w <= img.w,
      "crop: the box ", box.w, "x", box.h, " at (", box.x, ", ", box.y, ") is not inside the ", img.w, "x",
      img.h, " image");
  const Image rgb = convert_channels(img, in.channels);
  const int64_t C = rgb.c;
  Image cut{box.h, box.w, C, std::vector<uint8_t>(size_t(box.h * box.w * C))};
  for (int64_t y = 0; y < box.h; ++y)
    std::copy_n(rgb.px.data() + ((box.y + y) * rgb.w + box.x) * C, box.w * C, cut.px.data() + y * box.w * C);
  Image sized{in.height, in.width, C, std::vector<uint8_t>(size_t(in.height * in.width * C))};
  if (box.h == in.height && box.w == in.width)
    sized.px = cut.px;
  else
    resize_u8_pil(cut.px.data(), box.h, box.w, C, sized.px.data(), in.height, in.width,
                  filter_from_name("bilinear"));
  normalize(sized, in, out);
}

Image load_image_input(const std::string& path, const InputSpec& in, float* out) {
  Image img = read_image(path);
  try {
    preprocess_image(img, in, out);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  return img;
}

void preprocess_encoded(const uint8_t* data, size_t size, const InputSpec& in, float* out) {
  const Image img = decode_image(data, size, "encoded image");
  try {
    preprocess_image(img, in, out);
  } catch (const Error& e) {
    throw Error(std::string("encoded image: ") + e.what());
  }
}

void preprocess_pixels(const uint8_t* hwc, int64_t h, int64_t w, int64_t c, const InputSpec& in, float* out) {
  VIT_CHECK(hwc, "pixels: no data");
  VIT_CHECK(h > 0 && w > 0, "pixels: height and width must be positive, got ", h, " x ", w);
  VIT_CHECK(c == 1 || c == 3 || c == 4, "pixels: channels must be 1 (gray), 3 (RGB) or 4 (RGBA), got ", c);
  VIT_CHECK(h <= INT64_MAX / c / w, "pixels: ", h, " x ", w, " x ", c, " bytes is more than memory can hold");
  Image img;
  img.h = h;
  img.w = w;
  img.c = c;
  img.px.assign(hwc, hwc + h * w * c);
  preprocess_image(img, in, out);
}

}  // namespace vit
