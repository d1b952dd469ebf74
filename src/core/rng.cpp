#include "vit/core/rng.h"

#include <cmath>

namespace vit {

double Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Rng::trunc_normal(double std, double lo, double hi) {
  for (;;) {
    double v = normal() * std;
    if (v >= lo && v <= hi) return v;
  }
}

}  // namespace vit
