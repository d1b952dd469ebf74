// Separable image resampling with Pillow's filters, antialiased when shrinking (the filter
// is widened by the scale factor), as Pillow's Image.resize and, for float planes,
// torch.nn.functional.interpolate(..., antialias=True). Output pixel x samples the input
// around center (x + 0.5) * in / out; weights are normalized to sum to one per output
// pixel (truncated at the borders), so edges need no clamping.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

enum class Filter { Nearest, Box, Bilinear, Hamming, Bicubic, Lanczos };

// Pillow's names: nearest, box, bilinear, hamming, bicubic, lanczos. Throws on others.
Filter filter_from_name(const std::string& name);
const char* filter_name(Filter f);
// Pillow's integer codes (Image.Resampling: NEAREST 0, LANCZOS 1, BILINEAR 2, BICUBIC 3,
// BOX 4, HAMMING 5), as Hugging Face's preprocessor_config.json stores them.
Filter filter_from_pil_code(int code);
int pil_code(Filter f);

// timm's scale_size before a center crop: floor(size / crop_pct) in doubles, as Python's
// math.floor(size / crop_pct) (224 / (224 / 240) is 240; in float it was 239.99999).
int64_t scale_size(int64_t size, double crop_pct);

// The weights of one axis: output i reads input [first[i], first[i] + count[i]) with
// weights w[i * taps + j].
struct ResampleAxis {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<double> w;
};
// Filter f from in_size to out_size samples (Bicubic uses a = -0.5, as Pillow and torch's
// antialiased bicubic; not Nearest).
ResampleAxis resample_axis(int64_t in_size, int64_t out_size, Filter f);

// Pillow's 8-bit resize of an interleaved [H, W, C] image to [oh, ow, C]: coefficients in
// 22-bit fixed point, rounded and clamped to 0..255 after the horizontal pass and again
// after the vertical one, as Pillow does (so pixels equal Pillow's). Nearest takes the
// pixel Pillow takes: at the running sum in / out * (1/2 + 1 + 1 + ...), truncated.
void resize_u8_pil(const uint8_t* src, int64_t h, int64_t w, int64_t c, uint8_t* dst, int64_t oh, int64_t ow,
                   Filter f);

// Float planes [C, H, W] -> [C, oh, ow] with the same weights in floating point: width
// first, then height (torch's order). With Bilinear or Bicubic this is
// F.interpolate(x, (oh, ow), mode=..., align_corners=False, antialias=True).
void resize_planes_aa(const float* src, int64_t C, int64_t H, int64_t W, float* dst, int64_t oh, int64_t ow,
                      Filter f);

// Bicubic resize of float planes [C, H, W] -> [C, oh, ow] with PyTorch's kernel (a = -0.75, half-pixel
// centers, edge samples clamped: F.interpolate(mode='bicubic', align_corners=False), no antialias). scale_h
// and scale_w > 0: F.interpolate's scale_factor, which then places the samples (output pixel y reads around
// (y + 0.5) / scale_h - 0.5) where a size alone uses in / out.
void resize_bicubic(const float* src, int64_t C, int64_t H, int64_t W, float* dst, int64_t oh, int64_t ow,
                    double scale_h = 0, double scale_w = 0);

// Bilinear resize of float planes [C, H, W] -> [C, oh, ow], half-pixel centers, without
// antialiasing: F.interpolate(mode='bilinear', align_corners=False) (timm's loader resamples
// FlexiViT's position embeddings so).
void resize_bilinear(const float* src, int64_t C, int64_t H, int64_t W, float* dst, int64_t oh, int64_t ow);

}  // namespace vit
