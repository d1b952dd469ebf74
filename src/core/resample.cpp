#include "core/resample.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace vit {

namespace {

double box(double x) {
  return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
}
double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= std::numbers::pi;
  // Pillow writes the constants as floats: 0.54f + 0.46f * cos(x).
  return std::sin(x) / x * (double(0.54f) + double(0.46f) * std::cos(x));
}
double bicubic(double x) {
  const double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}
double lanczos(double x) {
  return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0;
}

struct Kernel {
  double (*fn)(double);
  double support;
};
Kernel kernel(Filter f) {
  switch (f) {
    case Filter::Box: return {box, 0.5};
    case Filter::Bilinear: return {bilinear, 1.0};
    case Filter::Hamming: return {hamming, 1.0};
    case Filter::Bicubic: return {bicubic, 2.0};
    case Filter::Lanczos: return {lanczos, 3.0};
    case Filter::Nearest: break;
  }
  throw Error("resample: nearest has no convolution kernel");
}

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS

inline uint8_t clip8(int32_t v) {
  const int32_t r = v >> kPrecisionBits;
  return uint8_t(std::clamp(r, 0, 255));
}

// Pillow's normalize_coeffs_8bpc: round half away from zero into fixed point.
std::vector<int32_t> fixed_point(const ResampleAxis& a) {
  std::vector<int32_t> k(a.w.size());
  for (size_t i = 0; i < a.w.size(); ++i)
    k[i] = a.w[i] < 0 ? int32_t(-0.5 + a.w[i] * (1 << kPrecisionBits))
                      : int32_t(0.5 + a.w[i] * (1 << kPrecisionBits));
  return k;
}

// Pillow's nearest resize (ImagingScaleAffine): output i reads the input at a running sum,
// s / 2 + s + s + ..., truncated. The product (i + 0.5) * s rounds another way where it is
// an integer in exact arithmetic: 8 -> 6 read input 6 at i = 4, Pillow input 5 (one size
// pair in five differed).
std::vector<int64_t> nearest_index(int64_t in, int64_t out) {
  const double s = double(in) / double(out);
  std::vector<int64_t> index(static_cast<size_t>(out));
  double at = s * 0.5;
  for (auto& i : index) {
    i = std::min<int64_t>(in - 1, int64_t(at));
    at += s;
  }
  return index;
}

void nearest_u8(const uint8_t* src, int64_t h, int64_t w, int64_t c, uint8_t* dst, int64_t oh, int64_t ow) {
  const std::vector<int64_t> iy = nearest_index(h, oh), ix = nearest_index(w, ow);
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x)
      std::copy_n(src + (iy[size_t(y)] * w + ix[size_t(x)]) * c, c, dst + (y * ow + x) * c);
}

}  // namespace

Filter filter_from_name(const std::string& name) {
  for (Filter f :
       {Filter::Nearest, Filter::Box, Filter::Bilinear, Filter::Hamming, Filter::Bicubic, Filter::Lanczos})
    if (name == filter_name(f)) return f;
  throw Error("unknown interpolation '" + name + "' (nearest, box, bilinear, hamming, bicubic, lanczos)");
}

const char* filter_name(Filter f) {
  switch (f) {
    case Filter::Nearest: return "nearest";
    case Filter::Box: return "box";
    case Filter::Bilinear: return "bilinear";
    case Filter::Hamming: return "hamming";
    case Filter::Bicubic: return "bicubic";
    case Filter::Lanczos: return "lanczos";
  }
  return "?";
}

Filter filter_from_pil_code(int code) {
  switch (code) {
    case 0: return Filter::Nearest;
    case 1: return Filter::Lanczos;
    case 2: return Filter::Bilinear;
    case 3: return Filter::Bicubic;
    case 4: return Filter::Box;
    case 5: return Filter::Hamming;
  }
  throw Error("unknown Pillow resample code " + std::to_string(code) + " (0 to 5)");
}

int64_t scale_size(int64_t size, double crop_pct) {
  return int64_t(std::min(std::floor(double(size) / crop_pct), 1e18));  // saturated: never past int64
}

int pil_code(Filter f) {
  for (int code = 0; code <= 5; ++code)
    if (filter_from_pil_code(code) == f) return code;
  throw Error("a resample filter without a Pillow code");
}

ResampleAxis resample_axis(int64_t in_size, int64_t out_size, Filter f) {
  VIT_CHECK(in_size > 0 && out_size > 0, "resample: sizes must be positive, got ", in_size, " -> ", out_size);
  const Kernel k = kernel(f);
  const double scale = double(in_size) / double(out_size);
  const double filterscale = std::max(scale, 1.0);  // widen the filter when shrinking
  const double support = k.support * filterscale;
  ResampleAxis a;
  a.taps = int64_t(std::ceil(support)) * 2 + 1;
  a.first.resize(out_size);
  a.count.resize(out_size);
  a.w.assign(out_size * a.taps, 0.0);
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale, ss = 1.0 / filterscale;
    // Pillow and torch truncate toward zero here, then clamp.
    const int64_t lo = std::max<int64_t>(0, int64_t(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(in_size, int64_t(center + support + 0.5));
    double* w = a.w.data() + i * a.taps;
    double total = 0;
    for (int64_t j = 0; j < hi - lo; ++j) total += w[j] = k.fn((j + lo - center + 0.5) * ss);
    if (total != 0.0)
      for (int64_t j = 0; j < hi - lo; ++j) w[j] /= total;
    a.first[i] = lo;
    a.count[i] = hi - lo;
  }
  return a;
}

void resize_u8_pil(const uint8_t* src, int64_t h, int64_t w, int64_t c, uint8_t* dst, int64_t oh, int64_t ow,
                   Filter f) {
  if (f == Filter::Nearest) return nearest_u8(src, h, w, c, dst, oh, ow);
  if (h == oh && w == ow) {
    std::copy_n(src, h * w * c, dst);
    return;
  }
  const ResampleAxis ax = resample_axis(w, ow, f), ay = resample_axis(h, oh, f);
  const std::vector<int32_t> kx = fixed_point(ax), ky = fixed_point(ay);
  // Horizontal pass over the rows the vertical pass reads (Pillow skips the others).
  const int64_t y0 = ay.first[0], y1 = ay.first[oh - 1] + ay.count[oh - 1];
  const bool horizontal = ow != w, vertical = oh != h;
  std::vector<uint8_t> tmp;
  const uint8_t* rows = src;  // [rows, ow', c] from row y0 (or 0 without a horizontal pass)
  int64_t row0 = 0, rw = w;
  if (horizontal) {
    tmp.resize((y1 - y0) * ow * c);
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t x = 0; x < ow; ++x) {
        const int32_t* k = kx.data() + x * ax.taps;
        const uint8_t* s = src + (y * w + ax.first[x]) * c;
        for (int64_t ch = 0; ch < c; ++ch) {
          int32_t acc = 1 << (kPrecisionBits - 1);
          for (int64_t j = 0; j < ax.count[x]; ++j) acc += int32_t(s[j * c + ch]) * k[j];
          tmp[((y - y0) * ow + x) * c + ch] = clip8(acc);
        }
      }
    rows = tmp.data();
    row0 = y0;
    rw = ow;
  }
  if (!vertical) {
    std::copy_n(rows, oh * ow * c, dst);
    return;
  }
  for (int64_t y = 0; y < oh; ++y) {
    const int32_t* k = ky.data() + y * ay.taps;
    for (int64_t x = 0; x < rw; ++x)
      for (int64_t ch = 0; ch < c; ++ch) {
        int32_t acc = 1 << (kPrecisionBits - 1);
        for (int64_t j = 0; j < ay.count[y]; ++j)
          acc += int32_t(rows[((ay.first[y] + j - row0) * rw + x) * c + ch]) * k[j];
        dst[(y * rw + x) * c + ch] = clip8(acc);
      }
  }
}

void resize_planes_aa(const float* src, int64_t C, int64_t H, int64_t W, float* dst, int64_t oh, int64_t ow,
                      Filter f) {
  VIT_CHECK(f != Filter::Nearest, "resize_planes_aa: nearest is not an antialiasing filter");
  if (H == oh && W == ow) {
    std::copy_n(src, C * H * W, dst);
    return;
  }
  const ResampleAxis ax = resample_axis(W, ow, f), ay = resample_axis(H, oh, f);
  std::vector<float> tmp(C * H * ow);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < ow; ++x) {
        const float* s = src + (c * H + y) * W + ax.first[x];
        const double* k = ax.w.data() + x * ax.taps;
        double acc = 0;
        for (int64_t j = 0; j < ax.count[x]; ++j) acc += s[j] * k[j];
        tmp[(c * H + y) * ow + x] = float(acc);
      }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < oh; ++y) {
      const double* k = ay.w.data() + y * ay.taps;
      for (int64_t x = 0; x < ow; ++x) {
        double acc = 0;
        for (int64_t j = 0; j < ay.count[y]; ++j) acc += tmp[(c * H + ay.first[y] + j) * ow + x] * k[j];
        dst[(c * oh + y) * ow + x] = float(acc);
      }
    }
}

namespace {
// Cubic convolution weights for offset t in [0, 1) (Keys, a = -0.75 as PyTorch).
void cubic_weights(float t, float w[4]) {
  const float a = -0.75f;
  auto near = [&](float x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](float x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}
}  // namespace

void resize_bicubic(const float* src, int64_t C, int64_t H, int64_t W, float* dst, int64_t oh, int64_t ow,
                    double scale_h, double scale_w) {
  // Input pixels per output pixel: PyTorch's 1 / scale_factor when one is given, else in / out.
  const double sy = scale_h > 0 ? 1.0 / scale_h : double(H) / double(oh);
  const double sx = scale_w > 0 ? 1.0 / scale_w : double(W) / double(ow);
  for (int64_t y = 0; y < oh; ++y) {
    const double fy = (y + 0.5) * sy - 0.5;
    const int64_t iy = int64_t(std::floor(fy));
    float wy[4];
    cubic_weights(float(fy - double(iy)), wy);
    for (int64_t x = 0; x < ow; ++x) {
      const double fx = (x + 0.5) * sx - 0.5;
      const int64_t ix = int64_t(std::floor(fx));
      float wx[4];
      cubic_weights(float(fx - double(ix)), wx);
      for (int64_t c = 0; c < C; ++c) {
        const float* s = src + c * H * W;
        float acc = 0.f;
        for (int i = 0; i < 4; ++i) {
          const int64_t yy = std::clamp<int64_t>(iy - 1 + i, 0, H - 1);
          float row = 0.f;
          for (int j = 0; j < 4; ++j) row += wx[j] * s[yy * W + std::clamp<int64_t>(ix - 1 + j, 0, W - 1)];
          acc += wy[i] * row;
        }
        dst[(c * oh + y) * ow + x] = acc;
      }
    }
  }
}

void resize_bilinear(const float* src, int64_t C, int64_t H, int64_t W, float* dst, int64_t oh, int64_t ow) {
  const double sy = double(H) / double(oh), sx = double(W) / double(ow);
  for (int64_t y = 0; y < oh; ++y) {
    const double fy = std::max(0.0, (y + 0.5) * sy - 0.5);
    const int64_t y0 = std::min<int64_t>(int64_t(fy), H - 1), y1 = std::min<int64_t>(y0 + 1, H - 1);
    const float wy = float(fy - double(y0));
    for (int64_t x = 0; x < ow; ++x) {
      const double fx = std::max(0.0, (x + 0.5) * sx - 0.5);
      const int64_t x0 = std::min<int64_t>(int64_t(fx), W - 1), x1 = std::min<int64_t>(x0 + 1, W - 1);
      const float wx = float(fx - double(x0));
      for (int64_t c = 0; c < C; ++c) {
        const float* s = src + c * H * W;
        const float top = s[y0 * W + x0] * (1 - wx) + s[y0 * W + x1] * wx;
        const float bot = s[y1 * W + x0] * (1 - wx) + s[y1 * W + x1] * wx;
        dst[(c * oh + y) * ow + x] = top * (1 - wy) + bot * wy;
      }
    }
  }
}

}  // namespace vit
