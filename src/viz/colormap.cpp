#include "viz/colormap.h"

#include <algorithm>
#include <cmath>

namespace vit::viz {

namespace {
// viridis(10) in R: #440154 #482878 #3E4A89 #31688E #26828E #1F9E89 #35B779 #6DCD59 #B4DE2C #FDE725.
constexpr uint32_t kViridis[] = {0x440154, 0x482878, 0x3E4A89, 0x31688E, 0x26828E,
                                 0x1F9E89, 0x35B779, 0x6DCD59, 0xB4DE2C, 0xFDE725};
constexpr int kStops = sizeof(kViridis) / sizeof(kViridis[0]);

double channel(uint32_t rgb, int shift) {
  return double((rgb >> shift) & 0xFF) / 255.0;
}
}  // namespace

Rgb viridis(double t) {
  t = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0) * (kStops - 1);
  const int i = std::min(int(t), kStops - 2);
  const double f = t - i;
  auto mix = [&](int shift) {
    return (1 - f) * channel(kViridis[i], shift) + f * channel(kViridis[i + 1], shift);
  };
  return {mix(16), mix(8), mix(0)};
}

std::array<uint8_t, 3> viridis_u8(double t) {
  const Rgb c = viridis(t);
  auto u8 = [](double v) { return uint8_t(std::lround(v * 255.0)); };
  return {u8(c.r), u8(c.g), u8(c.b)};
}

}  // namespace vit::viz
