// Decoding PNG and JPEG files (libpng, libjpeg-turbo: the decoders Pillow uses too, so
// pixels match torchvision's), channel conversion, resizing, and writing PNG.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/resample.h"

namespace vit {

// 8-bit pixels, interleaved [H, W, C], C = 1 (gray), 3 (RGB) or 4 (RGBA).
struct Image {
  int64_t h = 0, w = 0, c = 0;
  std::vector<uint8_t> px;
};

// A box of an image, in its pixels: rows [y, y + h), columns [x, x + w).
struct CropBox {
  int64_t y = 0, x = 0, h = 0, w = 0;
};

// Throws vit::Error naming the file when it is missing, not PNG/JPEG, corrupt, or larger
// than max_image_pixels().
Image read_image(const std::string& path);
// The same from PNG or JPEG bytes in memory; `name` stands for the file in errors.
Image decode_image(const uint8_t* data, size_t size, const std::string& name = "image");
void write_png(const std::string& path, const Image& img);  // atomic, like every write
// Images of more pixels than this are refused from their header, before anything is
// allocated: a corrupt or hostile file can claim 65535 x 65535 pixels in a few bytes (the
// fuzzer found a JPEG asking for 12 GB). The default is Pillow's DecompressionBombError
// limit, 2 x 89,478,485 pixels, or VIT_MAX_IMAGE_PIXELS when set; set_max_image_pixels
// overrides both, and its 0 lifts the limit. Process-wide, like Pillow's Image.MAX_IMAGE_PIXELS.
int64_t max_image_pixels();
void set_max_image_pixels(int64_t pixels);
// To `channels` channels: gray -> RGB replicates, RGB -> gray uses ITU-R 601-2 luma
// (Pillow's convert('L')), alpha is dropped (Pillow's convert('RGB')).
Image convert_channels(const Image& img, int64_t channels);
// (resize_bilinear and resize_bicubic, PyTorch's kernels: core/resample.h)
// Either of the two by name ("bilinear" or "bicubic").
void resize(const std::string& mode, const float* src, int64_t C, int64_t H, int64_t W, float* dst,
            int64_t oh, int64_t ow);

}  // namespace vit
