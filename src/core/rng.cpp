#include "core/rng.h"

#include <algorithm>
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

void Rng::fill_trunc_normal(float* out, int64_t n, double std, double lo, double hi) {
  const uint64_t base = state_;
  // Each value as trunc_normal's first try draws it, as long as none before it was rejected.
  int64_t rejected = n;
#pragma omp parallel for schedule(static) reduction(min : rejected) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i) {
    Rng r(base + 2 * uint64_t(i));
    const double v = r.normal() * std;
    if (v >= lo && v <= hi)
      out[i] = float(v);
    else
      rejected = std::min(rejected, i);
  }
  // From the first rejected value on, one at a time as trunc_normal draws them: rejections are
  // rare where this is used (timm's +-2 at std 0.02 is +-100 std), and after one every later
  // value's draws move.
  state_ = base + 2 * uint64_t(rejected);
  for (int64_t i = rejected; i < n; ++i) out[i] = float(trunc_normal(std, lo, hi));
}

}  // namespace vit
