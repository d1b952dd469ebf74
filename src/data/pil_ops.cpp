#include "data/pil_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace vit {
namespace {

using Lut = std::array<uint8_t, 256>;

// The image as 8-bit planes (a buffer per thread, reused: the ops run per sample) and back.
std::vector<uint8_t>& to_bytes(const float* img, int64_t n) {
  thread_local std::vector<uint8_t> q;
  q.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) q[size_t(i)] = uint8_t(std::lround(std::clamp(img[i], 0.f, 1.f) * 255.f));
  return q;
}
void from_bytes(const std::vector<uint8_t>& q, float* img) {
  for (size_t i = 0; i < q.size(); ++i) img[i] = float(q[i]) / 255.f;
}

void apply_lut(float* img, int64_t C, int64_t HW, const std::vector<Lut>& luts) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < HW; ++i) {
      const auto q = uint8_t(std::lround(std::clamp(img[c * HW + i], 0.f, 1.f) * 255.f));
      img[c * HW + i] = float(luts[size_t(c)][q]) / 255.f;
    }
}

std::vector<Lut> same_lut(int64_t C, auto f) {
  Lut l;
  for (int i = 0; i < 256; ++i) l[size_t(i)] = uint8_t(std::clamp(f(i), 0, 255));
  return std::vector<Lut>(size_t(C), l);
}

// Per channel: the histogram's LUT (autocontrast or equalize).
std::vector<Lut> histogram_luts(const std::vector<uint8_t>& q, int64_t C, int64_t HW, bool equalize) {
  std::vector<Lut> luts(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    std::array<int64_t, 256> h{};
    for (int64_t i = 0; i < HW; ++i) ++h[q[size_t(c * HW + i)]];
    Lut& l = luts[size_t(c)];
    for (int i = 0; i < 256; ++i) l[size_t(i)] = uint8_t(i);
    int lo = 0, hi = 255;
    while (lo < 256 && h[size_t(lo)] == 0) ++lo;
    while (hi >= 0 && h[size_t(hi)] == 0) --hi;
    if (hi <= lo) continue;  // one value: left as it is (both)
    if (!equalize) {
      // ImageOps.autocontrast(cutoff=0): int(i * scale + offset), clipped.
      const double scale = 255.0 / double(hi - lo), offset = -lo * scale;
      for (int i = 0; i < 256; ++i)
        l[size_t(i)] = uint8_t(std::clamp(int(double(i) * scale + offset), 0, 255));
      continue;
    }
    // ImageOps.equalize: a step of (pixels - the last value's count) / 255.
    int64_t total = 0;
    for (int64_t v : h) total += v;
    const int64_t step = (total - h[size_t(hi)]) / 255;
    if (step == 0) continue;
    int64_t n = step / 2;
    for (int i = 0; i < 256; ++i) {
      l[size_t(i)] = uint8_t(std::min<int64_t>(255, n / step));
      n += h[size_t(i)];
    }
  }
  return luts;
}

// Image.blend(degenerate, image, alpha) of one pixel: float arithmetic truncated, clipped.
uint8_t blend(uint8_t degenerate, uint8_t pixel, float alpha) {
  const float t = float(int(degenerate)) + alpha * float(int(pixel) - int(degenerate));
  return t <= 0.f ? 0 : t >= 255.f ? 255 : uint8_t(t);
}

// Pillow's RGB -> L: (299 R + 587 G + 114 B) / 1000 in 16-bit fixed point, rounded.
uint8_t luma(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

// ImageFilter.SMOOTH (3x3: 1 around, 5 in the centre, / 13), edges copied, as Pillow's 3x3 filter.
void smooth(const std::vector<uint8_t>& q, int64_t C, int64_t H, int64_t W, std::vector<uint8_t>& out) {
  out = q;
  const float k1 = 1.f / 13.f, k5 = 5.f / 13.f;
  for (int64_t c = 0; c < C; ++c) {
    const uint8_t* p = q.data() + c * H * W;
    auto row = [&](int64_t y, int64_t x, float mid) {
      const uint8_t* r = p + y * W;
      return float(r[x - 1]) * k1 + float(r[x]) * mid + float(r[x + 1]) * k1;
    };
    for (int64_t y = 1; y + 1 < H; ++y)
      for (int64_t x = 1; x + 1 < W; ++x) {
        float ss = 0.5f;  // rounds
        ss += row(y + 1, x, k1);
        ss += row(y, x, k5);
        ss += row(y - 1, x, k1);
        out[size_t((c * H + y) * W + x)] = ss <= 0.f ? 0 : ss >= 255.f ? 255 : uint8_t(ss);
      }
  }
}

// Image.transform(AFFINE, (a, b, c, d, e, f), BILINEAR, fillcolor): the output pixel x, y
// samples the input at (a (x + .5) + b (y + .5) + c, d (x + .5) + e (y + .5) + f).
void affine(const double* m, float* img, int64_t C, int64_t H, int64_t W, const float* fill) {
  const std::vector<uint8_t>& q = to_bytes(img, C * H * W);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      double xin = m[0] * (double(x) + 0.5) + m[1] * (double(y) + 0.5) + m[2];
      double yin = m[3] * (double(x) + 0.5) + m[4] * (double(y) + 0.5) + m[5];
      if (xin < 0.0 || xin >= double(W) || yin < 0.0 || yin >= double(H)) {
        for (int64_t c = 0; c < C; ++c) img[(c * H + y) * W + x] = std::round(fill[c] * 255.f) / 255.f;
        continue;
      }
      xin -= 0.5;
      yin -= 0.5;
      const auto x0 = int64_t(std::floor(xin)), y0 = int64_t(std::floor(yin));
      const double dx = xin - double(x0), dy = yin - double(y0);
      const int64_t xa = std::clamp<int64_t>(x0, 0, W - 1), xb = std::clamp<int64_t>(x0 + 1, 0, W - 1);
      const int64_t ya = std::clamp<int64_t>(y0, 0, H - 1);
      const bool below = y0 + 1 >= 0 && y0 + 1 < H;
      for (int64_t c = 0; c < C; ++c) {
        const uint8_t* p = q.data() + c * H * W;
        const double a = p[ya * W + xa], b = p[ya * W + xb];
        const double v1 = a + (b - a) * dx;
        double v2 = v1;
        if (below) {
          const double a2 = p[(y0 + 1) * W + xa], b2 = p[(y0 + 1) * W + xb];
          v2 = a2 + (b2 - a2) * dx;
        }
        img[(c * H + y) * W + x] = float(uint8_t(v1 + (v2 - v1) * dy)) / 255.f;
      }
    }
}

// Pillow's box blur radius for a Gaussian of radius (sigma) r in `passes` passes
// (_gaussian_blur_radius: Gwosdek et al.'s extended box), in float as Pillow computes it.
float box_radius(float r, int passes) {
  const float sigma2 = r * r / float(passes);
  const auto L = float(std::sqrt(12.0 * double(sigma2) + 1.0));
  const auto l = float(std::floor((double(L) - 1.0) / 2.0));
  float a = (2.f * l + 1.f) * (l * (l + 1.f) - 3.f * sigma2);
  a /= 6.f * (sigma2 - (l + 1.f) * (l + 1.f));
  return l + a;
}

// One pass of Pillow's box blur (ImagingHorizontalBoxBlur) over the n pixels p[0], p[step],
// ...: each the sum of the 2r + 1 around it by ww plus its two next neighbours by fw (the
// radius's fraction) in 24-bit fixed point, rounded; the line's ends repeat.
void box_pass(uint8_t* p, int64_t n, int64_t step, float radius, std::vector<uint8_t>& line) {
  const auto r = int64_t(radius);
  const auto ww = uint32_t(float(1u << 24) / (radius * 2.f + 1.f));
  const uint32_t fw = ((1u << 24) - uint32_t(r * 2 + 1) * ww) / 2;
  line.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) line[size_t(i)] = p[i * step];
  auto at = [&](int64_t i) { return uint64_t(line[size_t(std::clamp<int64_t>(i, 0, n - 1))]); };
  for (int64_t x = 0; x < n; ++x) {
    uint64_t acc = 0;
    for (int64_t k = x - r; k <= x + r; ++k) acc += at(k);
    const uint64_t bulk = acc * ww + (at(x - r - 1) + at(x + r + 1)) * fw;
    p[x * step] = uint8_t((bulk + (1u << 23)) >> 24);
  }
}

// ImageFilter.GaussianBlur(radius): three box passes along the rows, then three along the columns.
void pil_gaussian_blur(std::vector<uint8_t>& q, int64_t C, int64_t H, int64_t W, float radius) {
  const float r = box_radius(radius, 3);
  thread_local std::vector<uint8_t> line;
  for (int64_t c = 0; c < C; ++c) {
    uint8_t* p = q.data() + c * H * W;
    for (int pass = 0; pass < 3; ++pass)
      for (int64_t y = 0; y < H; ++y) box_pass(p + y * W, W, 1, r, line);
    for (int pass = 0; pass < 3; ++pass)
      for (int64_t x = 0; x < W; ++x) box_pass(p + x, H, W, r, line);
  }
}

}  // namespace

void tv_gaussian_blur(float* img, int64_t C, int64_t H, int64_t W, int kernel, double sigma) {
  // torchvision's _get_gaussian_kernel1d in float32: exp(-(x / sigma)^2 / 2) at the integers
  // -k/2..k/2, over its sum. torchvision convolves with the outer product (float32); here the
  // rows, then the columns, in double: the same sums up to rounding far below a half step (a
  // 23 x 23 loop took 64-75 ms on a 224 x 224 RGB image, these two passes 9-13).
  const int half = kernel / 2;
  std::vector<double> k1(static_cast<size_t>(kernel));
  float sum = 0.f;
  for (int i = 0; i < kernel; ++i) {
    const float t = float(i - half) / float(sigma);
    k1[size_t(i)] = double(std::exp(-0.5f * (t * t)));
    sum += float(k1[size_t(i)]);
  }
  for (double& v : k1) v = double(float(v) / sum);
  const std::vector<uint8_t>& q = to_bytes(img, C * H * W);
  auto reflect = [](int64_t i, int64_t n) { return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; };
  thread_local std::vector<double> rows;
  rows.resize(size_t(H * W));
  for (int64_t c = 0; c < C; ++c) {
    const uint8_t* p = q.data() + c * H * W;
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        double s = 0;
        for (int j = 0; j < kernel; ++j) s += k1[size_t(j)] * p[y * W + reflect(x + j - half, W)];
        rows[size_t(y * W + x)] = s;
      }
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        double s = 0;
        for (int i = 0; i < kernel; ++i) s += k1[size_t(i)] * rows[size_t(reflect(y + i - half, H) * W + x)];
        img[(c * H + y) * W + x] = float(std::nearbyint(s)) / 255.f;  // torch.round: half to even
      }
  }
}

void pil_op(PilOp op, double arg, float* img, int64_t C, int64_t H, int64_t W, const float* fill) {
  const int64_t HW = H * W;
  switch (op) {
    case PilOp::AutoContrast:
    case PilOp::Equalize:
      apply_lut(img, C, HW, histogram_luts(to_bytes(img, C * HW), C, HW, op == PilOp::Equalize));
      return;
    case PilOp::Invert: apply_lut(img, C, HW, same_lut(C, [](int i) { return 255 - i; })); return;
    case PilOp::Posterize: {
      const int bits = int(arg);
      if (bits >= 8) return;  // timm's posterize: the image as it is
      const int mask = ~((1 << (8 - std::max(bits, 0))) - 1);
      apply_lut(img, C, HW, same_lut(C, [&](int i) { return i & mask; }));
      return;
    }
    case PilOp::Solarize:
      apply_lut(img, C, HW, same_lut(C, [&](int i) { return double(i) < arg ? i : 255 - i; }));
      return;
    case PilOp::SolarizeAdd:
      apply_lut(img, C, HW, same_lut(C, [&](int i) { return i < 128 ? std::min(255, i + int(arg)) : i; }));
      return;
    case PilOp::Color:
    case PilOp::Contrast:
    case PilOp::Brightness:
    case PilOp::Sharpness: {
      std::vector<uint8_t>& q = to_bytes(img, C * HW);
      thread_local std::vector<uint8_t> d;  // the degenerate image; black for brightness
      d.assign(q.size(), 0);
      if (op == PilOp::Sharpness) {
        smooth(q, C, H, W, d);
      } else if (op == PilOp::Color) {
        if (C == 3)
          for (int64_t i = 0; i < HW; ++i)
            d[size_t(i)] = d[size_t(HW + i)] = d[size_t(2 * HW + i)] =
                luma(q[size_t(i)], q[size_t(HW + i)], q[size_t(2 * HW + i)]);
        else
          d = q;  // no color to take away
      } else if (op == PilOp::Contrast) {
        double sum = 0;
        for (int64_t i = 0; i < HW; ++i)
          sum += C == 3 ? luma(q[size_t(i)], q[size_t(HW + i)], q[size_t(2 * HW + i)]) : q[size_t(i)];
        std::fill(d.begin(), d.end(), uint8_t(int(sum / double(HW) + 0.5)));
      }
      const auto alpha = float(arg);
      for (size_t i = 0; i < q.size(); ++i) q[i] = blend(d[i], q[i], alpha);
      from_bytes(q, img);
      return;
    }
    case PilOp::Rotate: {
      // Image.rotate: the angle taken modulo 360 as Python's %, then the inverse map about the centre.
      double deg = std::fmod(arg, 360.0);
      if (deg < 0) deg += 360.0;
      if (deg == 0.0) return;
      if (deg == 180.0 || ((deg == 90.0 || deg == 270.0) && H == W)) {  // Pillow's exact transposes
        std::vector<float> src(img, img + C * HW);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t y = 0; y < H; ++y)
            for (int64_t x = 0; x < W; ++x) {
              // Counter-clockwise: output (y, x) from input (x, W-1-y) at 90, (H-1-x, y) at 270.
              const int64_t sy = deg == 180.0 ? H - 1 - y : deg == 90.0 ? x : W - 1 - x;
              const int64_t sx = deg == 180.0 ? W - 1 - x : deg == 90.0 ? W - 1 - y : y;
              img[(c * H + y) * W + x] = src[size_t((c * H + sy) * W + sx)];
            }
        return;
      }
      // The matrix rounded to 15 decimals, as Image.rotate does (round(cos(angle), 15)).
      // Python rounds the exact binary value in decimal; so does printf, and strtod reads back
      // the nearest double (v * 1e15 rounded in binary first can land on a tie and go astray).
      auto r15 = [](double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.15f", v);
        return std::strtod(buf, nullptr);
      };
      const double a = -(deg * (M_PI / 180.0)),  // math.radians: x * (pi / 180)
          cx = double(W) / 2.0, cy = double(H) / 2.0;
      double m[6] = {r15(std::cos(a)), r15(std::sin(a)), 0.0, r15(-std::sin(a)), r15(std::cos(a)), 0.0};
      m[2] = m[0] * -cx + m[1] * -cy + cx;
      m[5] = m[3] * -cx + m[4] * -cy + cy;
      affine(m, img, C, H, W, fill);
      return;
    }
    case PilOp::ShearX: {
      const double m[6] = {1, arg, 0, 0, 1, 0};
      affine(m, img, C, H, W, fill);
      return;
    }
    case PilOp::ShearY: {
      const double m[6] = {1, 0, 0, arg, 1, 0};
      affine(m, img, C, H, W, fill);
      return;
    }
    case PilOp::TranslateX: {
      const double m[6] = {1, 0, arg, 0, 1, 0};
      affine(m, img, C, H, W, fill);
      return;
    }
    case PilOp::TranslateY: {
      const double m[6] = {1, 0, 0, 0, 1, arg};
      affine(m, img, C, H, W, fill);
      return;
    }
    case PilOp::Grayscale: {
      if (C != 3) return;  // L stays L
      std::vector<uint8_t>& q = to_bytes(img, C * HW);
      for (int64_t i = 0; i < HW; ++i)
        q[size_t(i)] = q[size_t(HW + i)] = q[size_t(2 * HW + i)] =
            luma(q[size_t(i)], q[size_t(HW + i)], q[size_t(2 * HW + i)]);
      from_bytes(q, img);
      return;
    }
    case PilOp::GaussianBlur: {
      std::vector<uint8_t>& q = to_bytes(img, C * HW);
      pil_gaussian_blur(q, C, H, W, float(arg));  // Pillow reads the radius as a C float
      from_bytes(q, img);
      return;
    }
  }
}

}  // namespace vit
