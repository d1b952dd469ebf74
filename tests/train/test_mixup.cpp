// Mixup and CutMix: soft targets that sum to one and carry lam, images mixed with the
// reversed batch, CutMix's lam equal to the pasted box's share, and Beta draws.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "support/check.h"
#include "train/mixup.h"
#include "train/shard.h"

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

// A data-parallel shard mixes its rows with the partners it loaded: row for row the same
// bits as mixing the whole batch (odd batch: the middle row is its own partner).
TEST(Mixup, ShardsMixExactlyAsTheWholeBatch) {
  const int64_t B = 7, C = 2, H = 6, W = 5, K = 4, n = C * H * W;
  const auto x = test::randn(B * n, 3);
  const std::vector<int64_t> y = {0, 1, 2, 3, 0, 1, 2};
  // Mixup, CutMix, both in every mode, and CutMix's min-max boxes.
  for (int kind = 0; kind < 6; ++kind) {
    MixupConfig cfg;
    (kind == 0 ? cfg.mixup_alpha : cfg.cutmix_alpha) = 1.f;
    if (kind >= 2) cfg.mixup_alpha = 0.8f, cfg.mode = kind == 2 ? "batch" : kind == 3 ? "pair" : "elem";
    if (kind == 5) cfg.cutmix_minmax = {0.2, 0.7};
    for (uint64_t step = 0; step < 6; ++step) {
      std::vector<float> whole = x, t_whole(B * K);
      mix_batch(cfg, whole.data(), y.data(), t_whole.data(), B, C, H, W, K, 0.1f, 9, step);
      for (int ranks : {2, 3}) {
        for (int r = 0; r < ranks; ++r) {
          const Rows rows = shard_rows(B, r, ranks);
          const int64_t m = rows.size();
          std::vector<float> img(m * n), part(m * n), t(m * K);
          std::vector<int64_t> ly(m), py(m);
          for (int64_t i = 0; i < m; ++i) {
            std::copy_n(x.data() + (rows.lo + i) * n, n, img.data() + i * n);
            std::copy_n(x.data() + (B - 1 - rows.lo - i) * n, n, part.data() + i * n);
            ly[i] = y[rows.lo + i];
            py[i] = y[B - 1 - rows.lo - i];
          }
          mix_shard(cfg, img.data(), part.data(), ly.data(), py.data(), t.data(), rows.lo, m, B, C, H, W, K,
                    0.1f, 9, step);
          EXPECT_EQ(0, std::memcmp(img.data(), whole.data() + rows.lo * n, m * n * sizeof(float)))
              << "kind " << kind << " step " << step << " rank " << r << "/" << ranks;
          EXPECT_EQ(0, std::memcmp(t.data(), t_whole.data() + rows.lo * K, m * K * sizeof(float)));
        }
      }
    }
  }
}

// timm's modes: "elem" draws for each sample (its partner reads the sample unmixed), "pair"
// for each pair (both samples of a pair alike), "batch" once; each sample's image is its
// draw's mix of itself and its partner, and its target carries the same lam.
TEST(Mixup, ElemDrawsPerSampleAndPairPerPair) {
  const int64_t B = 8, C = 1, H = 2, W = 2, K = 8, n = C * H * W;
  const std::vector<int64_t> y = {0, 1, 2, 3, 4, 5, 6, 7};
  for (const char* mode : {"batch", "pair", "elem"}) {
    MixupConfig cfg;
    cfg.mixup_alpha = 1.f;
    cfg.prob = 0.9f;
    cfg.mode = mode;
    std::set<float> lams_seen;
    for (uint64_t step = 0; step < 4; ++step) {
      std::vector<float> x(B * n), t(B * K);
      for (int64_t i = 0; i < B * n; ++i) x[i] = float(i / n);  // image b is all b
      const float lam0 = mix_batch(cfg, x.data(), y.data(), t.data(), B, C, H, W, K, 0.f, 11, step);
      EXPECT_EQ(lam0, t[0]) << mode;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t q = B - 1 - b;
        const float lam = t[b * K + b];  // labels are the rows: lam on its own, 1 - lam on its partner's
        EXPECT_NEAR(t[b * K + q], 1.f - lam, 1e-6) << mode << " row " << b;
        for (int64_t i = 0; i < n; ++i)
          EXPECT_NEAR(x[b * n + i], lam * float(b) + (1.f - lam) * float(q), 1e-5) << mode << " row " << b;
        if (std::string(mode) != "elem") {
          EXPECT_EQ(lam, t[q * K + q]) << mode << ": rows " << b << " and " << q << " drew apart";
        }
        if (std::string(mode) == "batch") {
          EXPECT_EQ(lam, lam0) << "batch mode: row " << b << " drew its own";
        }
        lams_seen.insert(lam);
      }
    }
    // Over 4 steps: batch 4 draws, pair 16 (4 pairs), elem 32, a few left unmixed at prob 0.9.
    const size_t most = std::string(mode) == "batch" ? 4 : std::string(mode) == "pair" ? 16 : 32;
    EXPECT_LE(lams_seen.size(), most) << mode;
    EXPECT_GE(lams_seen.size(), most / 2 + 1) << mode;
  }
}

// --cutmix-minmax: the box's sides fall in [min, max) of the image's and lam is the uncut share.
TEST(Mixup, CutMixMinMaxBoxesHaveSidesInTheRange) {
  const int64_t B = 2, C = 1, H = 20, W = 30, K = 2, n = C * H * W;
  MixupConfig cfg;
  cfg.cutmix_minmax = {0.3, 0.6};
  ASSERT_TRUE(cfg.active());
  std::set<std::pair<int64_t, int64_t>> sizes;
  for (uint64_t step = 0; step < 40; ++step) {
    std::vector<float> x(B * n, 0.f), t(B * K);
    std::fill(x.begin(), x.begin() + n, 1.f);  // image 0 ones, image 1 zeros
    const std::vector<int64_t> y = {0, 1};
    const float lam = mix_batch(cfg, x.data(), y.data(), t.data(), B, C, H, W, K, 0.f, 2, step);
    int64_t rows = 0, cols = 0, cut = 0;
    for (int64_t r = 0; r < H; ++r) {
      int64_t in_row = 0;
      for (int64_t c = 0; c < W; ++c) in_row += x[r * W + c] == 0.f;
      rows += in_row > 0, cols = std::max(cols, in_row), cut += in_row;
    }
    EXPECT_EQ(cut, rows * cols) << "step " << step << ": not one box";
    EXPECT_GE(rows, 6) << "step " << step;  // [0.3 x 20, 0.6 x 20) = [6, 12)
    EXPECT_LT(rows, 12) << "step " << step;
    EXPECT_GE(cols, 9) << "step " << step;  // [9, 18)
    EXPECT_LT(cols, 18) << "step " << step;
    EXPECT_NEAR(lam, 1.0 - double(cut) / double(n), 1e-6);
    sizes.insert({rows, cols});
  }
  EXPECT_GT(sizes.size(), 10u) << "the sides hardly vary";
  cfg.cutmix_minmax = {0.6, 0.3};
  EXPECT_NE(
      test::error_of([&] { cfg.validate(); }).find("--cutmix-minmax wants MIN MAX with 0 < MIN < MAX <= 1"),
      std::string::npos);
}

// --mixup-off-epoch E: mixing in epochs 0 .. E-1 (counted from 0, as timm), then not; 0 never stops.
TEST(Mixup, OffEpochStopsMixingFromThatEpoch) {
  MixupConfig cfg;
  EXPECT_FALSE(cfg.active_in(0));
  cfg.mixup_alpha = 0.2f;
  cfg.off_epoch = 2;
  EXPECT_TRUE(cfg.active_in(0));
  EXPECT_TRUE(cfg.active_in(1));
  EXPECT_FALSE(cfg.active_in(2));
  EXPECT_FALSE(cfg.active_in(7));
  cfg.off_epoch = 0;
  EXPECT_TRUE(cfg.active_in(1000));
}

TEST(Shard, EveryRowOfEveryBatchOnceWithItsPartner) {
  std::vector<int64_t> order(23);
  for (int64_t i = 0; i < 23; ++i) order[i] = 100 + i;
  const int ranks = 3;
  std::vector<int> seen(23, 0);
  for (int r = 0; r < ranks; ++r) {
    const ShardPlan p = shard_epoch(order, 8, r, ranks, true);
    ASSERT_EQ(p.ends.size(), 3u);  // batches of 8, 8, 7
    int64_t begin = 0;
    for (int64_t s = 0; s < 3; ++s) {
      const int64_t bs = s < 2 ? 8 : 7, m = (p.ends[s] - begin) / 2;
      EXPECT_EQ(m, shard_rows(bs, r, ranks).size());
      for (int64_t i = 0; i < m; ++i) {
        const int64_t row = p.order[begin + i] - 100 - s * 8;  // row within the batch
        ++seen[s * 8 + row];
        EXPECT_EQ(p.order[begin + m + i] - 100 - s * 8, bs - 1 - row) << "partner of row " << row;
      }
      begin = p.ends[s];
    }
  }
  for (int64_t i = 0; i < 23; ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
}

}  // namespace vit
