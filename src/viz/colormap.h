// Viridis, the perceptually uniform colormap of matplotlib (van der Walt and Smith), as the
// ten colors of R's viridis(10) linearly interpolated: dark blue (0) to yellow (1).
#pragma once
#include <array>
#include <cstdint>

namespace vit::viz {

struct Rgb {
  double r = 0, g = 0, b = 0;  // each in [0, 1]
};

// t is clamped to [0, 1].
Rgb viridis(double t);
// The same as 8-bit RGB.
std::array<uint8_t, 3> viridis_u8(double t);

}  // namespace vit::viz
