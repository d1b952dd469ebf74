// The generic int8 kernels: a row's quantization and the product over int8.h's packed layout
// in plain loops, the bits every other path's kernels are checked against
// (tests/ops/test_int8.cpp), and the table's entries on a CPU without a vector path.
#include <algorithm>
#include <cmath>

#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"

namespace vit::cpu {

namespace {
// Symmetric scale of n values: max |v| / 127; NaN when one is not finite (v * 0 is NaN then).
float row_scale(const float* v, int64_t n) {
  float amax = 0.f, bad = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(v[i]));
    bad += v[i] * 0.f;
  }
  return bad == 0.f ? amax / 127.f : std::nanf("");
}

// q[0, n) = round(v / scale) in [-127, 127], to nearest even as nearbyint does (adding and
// taking off 1.5 * 2^23 rounds any |r| < 2^22 so, and the loop vectorizes); scale > 0. scale = amax / 127 is
// a fixed point of the round trip (amax / 127 of 127 * scale gives scale back: checked on 43 million floats
// from 5e-10 to 32), so weights dequantized from a checkpoint quantize to the same int8 values and scales
// again.
void quantize_row(int8_t* q, const float* v, int64_t n, float scale) {
  const float inv = 1.f / scale;
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::clamp((v[i] * inv + kRound) - kRound, -127.f, 127.f);
    q[i] = int8_t(int32_t(r));
  }
}

}  // namespace

float quantize_row_s8_reference(int8_t* q, const float* x, int64_t K, int64_t ldq) {
  const float scale = row_scale(x, K);
  if (scale > 0.f)
    quantize_row(q, x, K, scale);
  else
    std::fill(q, q + K, int8_t(0));  // zeros, a NaN or an infinity: its products are 0 (times NaN)
  std::fill(q + K, q + ldq, int8_t(0));
  return scale;
}

void gemm_s8_reference(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, const int8_t* W,
                       const int32_t*, int64_t nb, int64_t Kp) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t j = 0; j < kS8Block; ++j) {
        int32_t s = 0;
        for (int64_t k = 0; k < Kp; ++k) s += int32_t(A[m * lda + k]) * W[s8_offset(b * kS8Block + j, k, Kp)];
        C[m * ldc + b * kS8Block + j] = s;
      }
    }
}

void dequant_s8_reference(float* y, int64_t ldy, const int32_t* C, int64_t ldc, const float* sx,
                          const float* sw, const float* b, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      y[i * ldy + j] = float(C[i * ldc + j]) * (sx[i] * sw[j]) + (b ? b[j] : 0.f);
}

}  // namespace vit::cpu
