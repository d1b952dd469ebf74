// Test helpers that fail loudly: every comparison reports the worst mismatch (index, got,
// want) and the tolerance it broke.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"

namespace vit::test {

// Passes when max_i |got_i - want_i| <= tol * max(max_i |want_i|, floor).
// "Relative to the largest magnitude": a gradient is judged against its own scale, so
// near-zero entries do not demand impossible relative precision.
inline ::testing::AssertionResult close_rel_max(const std::string& what, const float* got, const float* want,
                                                int64_t n, double tol, double floor = 1e-12) {
  double scale = floor, worst = -1;
  int64_t wi = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, double(std::fabs(want[i])));
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    if (!(d <= worst) || std::isnan(d)) {
      worst = std::isnan(d) ? INFINITY : d;
      wi = i;
    }
  }
  if (n == 0 || worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": worst mismatch at index " << wi << ": got " << got[wi] << ", want " << want[wi]
         << ", |diff| " << worst << " > tol " << tol << " x max|want| " << scale << " (" << n << " elements)";
}

// Images in [0, 1] compared in 8-bit steps (round(255 v)): passes when no pixel differs by
// more than max_step steps and at most max_share of them differ at all; else says how many
// differ and the worst.
inline ::testing::AssertionResult pixels_match(const std::string& what, const std::vector<float>& got,
                                               const std::vector<float>& want, int max_step,
                                               double max_share) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, want " << want.size();
  int worst = 0;
  size_t differ = 0, at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int d = std::abs(int(std::lround(got[i] * 255.f)) - int(std::lround(want[i] * 255.f)));
    differ += d != 0;
    if (d > worst) worst = d, at = i;
  }
  if (worst <= max_step && double(differ) <= max_share * double(got.size()))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << differ << " of " << got.size() << " pixels differ, the worst by " << worst
         << "/255 at " << at << " (got " << got[at] * 255.f << ", want " << want[at] * 255.f
         << "; allowed: " << max_step << " steps on " << max_share * 100 << "% of them)";
}

// The message of the vit::Error that f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline std::vector<float> randn(int64_t n, uint64_t seed, float std = 1.f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(rng.normal()) * std;
  return v;
}

// Central finite differences of a scalar loss with respect to x[i], for up to max_checks
// indices spread over x, compared with the analytic gradient g. The loss is computed in
// float by the code under test (summed in double), so the step h must be large enough that
// rounding error (~1e-7 * |loss| / h) stays far below tol.
inline ::testing::AssertionResult gradcheck(const std::string& what, float* x, const float* g, int64_t n,
                                            const std::function<double()>& loss, double h, double tol,
                                            int64_t max_checks = 48) {
  std::vector<float> num, ana;
  const int64_t stride = std::max<int64_t>(1, n / max_checks);
  for (int64_t i = (n > max_checks ? 7 % stride : 0); i < n; i += stride) {
    const float x0 = x[i];
    x[i] = x0 + float(h);
    const double lp = loss();
    x[i] = x0 - float(h);
    const double lm = loss();
    x[i] = x0;
    num.push_back(float((lp - lm) / (2 * h)));
    ana.push_back(g[i]);
  }
  return close_rel_max(what + " (analytic vs finite difference)", ana.data(), num.data(), int64_t(num.size()),
                       tol, 1e-3);
}

}  // namespace vit::test
