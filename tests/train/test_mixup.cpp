// Mixup and CutMix: soft targets that sum to one and carry lam, images mixed with the
// reversed batch, CutMix's lam equal to the pasted box's share, and Beta draws.
#include <cmath>

#include "support/check.h"
#include "vit/train/mixup.h"

namespace vit {

TEST(Mixup, BlendsWithTheReversedBatchAndSoftensTargets) {
  const int64_t B = 4, C = 1, H = 2, W = 3, K = 5, n = C * H * W;
  std::vector<float> x(B * n), t(B * K);
  for (int64_t i = 0; i < B * n; ++i) x[i] = float(i / n);  // image b is all b
  const std::vector<int64_t> y = {0, 1, 2, 3};
  MixupConfig cfg;
  cfg.mixup_alpha = 0.8f;
  const float lam = mix_batch(cfg, x.data(), y.data(), t.data(), B, C, H, W, K, 0.1f, 7, 3);
  ASSERT_LT(lam, 1.f);
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_NEAR(x[b * n], lam * b + (1 - lam) * (B - 1 - b), 1e-5) << b;
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += t[b * K + k];
    EXPECT_NEAR(sum, 1.0, 1e-6);
    const float off = 0.1f / K;
    EXPECT_NEAR(t[b * K + y[b]], off + lam * 0.9f, 1e-6);
    EXPECT_NEAR(t[b * K + y[B - 1 - b]], off + (1 - lam) * 0.9f, 1e-6);
  }
}

TEST(Mixup, CutMixLamIsTheUncutShare) {
  const int64_t B = 2, C = 2, H = 16, W = 16, K = 3, n = C * H * W;
  MixupConfig cfg;
  cfg.cutmix_alpha = 1.f;
  for (uint64_t step = 0; step < 20; ++step) {
    std::vector<float> x(B * n), t(B * K);
    for (int64_t i = 0; i < n; ++i) x[i] = 1.f;  // image 0 ones, image 1 zeros
    const std::vector<int64_t> y = {0, 2};
    const float lam = mix_batch(cfg, x.data(), y.data(), t.data(), B, C, H, W, K, 0.f, 1, step);
    double kept = 0;
    for (int64_t i = 0; i < n; ++i) kept += x[i];
    EXPECT_NEAR(kept / n, lam, 1e-6) << "step " << step;
    EXPECT_NEAR(t[0], lam, 1e-6);
    EXPECT_NEAR(t[2], 1 - lam, 1e-6);
  }
}

TEST(Mixup, BetaDrawsHaveTheRightMean) {
  uint64_t state = 5;
  double s = 0, s2 = 0;
  const int N = 20000;
  for (int i = 0; i < N; ++i) {
    const double v = sample_beta(state, 0.8);
    ASSERT_GE(v, 0.0);
    ASSERT_LE(v, 1.0);
    s += v;
    s2 += v * v;
  }
  // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)) = 0.0962 for a = 0.8.
  EXPECT_NEAR(s / N, 0.5, 0.01);
  EXPECT_NEAR(s2 / N - 0.25, 1.0 / (4 * 2.6), 0.005);
}

}  // namespace vit
