// Attention maps, rollout and figures: tiny models with hand-set weights where the
// attention is known, rollout of identity attention, and PNGs decoded back to check
// their size and where the heatmap is bright.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "model/vit.h"
#include "support/check.h"
#include "support/models.h"
#include "support/temp_dir.h"
#include "viz/attention.h"
#include "viz/canvas.h"
#include "viz/figures.h"
#include "viz/plot.h"

namespace vit {
namespace {

// For the tests that draw: a build without cairo (VIT_CAIRO=OFF) has no pictures to check
// (Figures.WithoutCairoDrawingIsAClearError checks what it says instead). A macro: GTEST_SKIP
// returns from the function it is written in, which must be the test body.
#define VIT_REQUIRE_CAIRO() \
  if (!viz::canvas_available()) GTEST_SKIP() << "built without cairo (VIT_CAIRO=OFF): no pictures"

// 8x8 gray images, 4x4 patches (a 2x2 grid), a class token, D = 4, one head, one block.
ViTConfig tiny_config(int64_t depth = 1) {
  return test::gray_vit(4, 1, 4, depth);
}

// Every weight zero except LayerNorm scales (1) and attention that makes patch `target`
// take the class token's attention: the patches' inputs are all zero, so tokens differ by
// position embedding only. After norm1, `target` is s(1,-1,0,0) and every other token
// s(0,0,1,-1), s = sqrt(2). Queries are the constant q = (10,0,0,0) (a bias), keys
// k = norm1(x) (identity weight), so the score of `target` is 10 s / sqrt(4) = 5 sqrt(2)
// for every query and 0 for every other key.
void one_patch_takes_attention(ViT& m, int64_t target) {
  m.params().zero();
  const ViTConfig& c = m.config();
  for (const auto& name : {"norm.weight", "blocks.0.norm1.weight", "blocks.0.norm2.weight"}) {
    Tensor w = m.param(name);
    for (int64_t i = 0; i < w.numel(); ++i) w.data[i] = 1.f;
  }
  Tensor pos = m.param("pos_embed");  // [1, T, D]
  for (int64_t t = 0; t < c.num_tokens(); ++t) {
    const bool hot = t == 1 + target;
    const float row[4] = {hot ? 1.f : 0.f, hot ? -1.f : 0.f, hot ? 0.f : 1.f, hot ? 0.f : -1.f};
    std::copy(row, row + 4, pos.data + t * 4);
  }
  Tensor qkvw = m.param("blocks.0.attn.qkv.weight"),
         qkvb = m.param("blocks.0.attn.qkv.bias");  // [12, 4], [12]
  qkvb.data[0] = 10.f;
  for (int64_t i = 0; i < 4; ++i) qkvw.data[(4 + i) * 4 + i] = 1.f;
}

TEST(Attention, InferReturnsTheProbabilitiesAndTheSameLogits) {
  ViT m(tiny_config(2));
  m.init_weights(7);
  const ViTConfig& c = m.config();
  const int64_t B = 3, T = c.num_tokens();
  const auto x = test::randn(B * 64, 1);
  std::vector<float> plain(B * 3), with(B * 3), attn(c.depth * B * T * T, -1.f);
  m.infer(x.data(), B, nullptr, plain.data());
  m.infer(x.data(), B, nullptr, with.data(), attn.data());
  EXPECT_TRUE(
      test::close_rel_max("logits with and without attention output", with.data(), plain.data(), B * 3, 0.0));
  double worst = 0;  // every row is a distribution
  for (int64_t r = 0; r < c.depth * B * T; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) {
      EXPECT_GE(attn[r * T + j], 0.f);
      sum += attn[r * T + j];
    }
    worst = std::max(worst, std::fabs(sum - 1));
  }
  EXPECT_LT(worst, 1e-5) << "worst row sum error";
}

TEST(Attention, OnePatchTakesAllTheAttentionAndTheMapPeaksThere) {
  for (int64_t target = 0; target < 4; ++target) {
    ViT m(tiny_config());
    one_patch_takes_attention(m, target);
    const ViTConfig& c = m.config();
    const int64_t T = c.num_tokens();
    const auto x = test::randn(64, 2);  // ignored: the patch embedding is zero
    std::vector<float> logits(3), attn(T * T);
    m.infer(x.data(), 1, nullptr, logits.data(), attn.data());
    // Row 0 (the class token): e^s / (e^s + 4) on target, 1 / (e^s + 4) elsewhere.
    const double s = 5 * std::sqrt(2.0), hot = std::exp(s) / (std::exp(s) + 4), cold = 1 / (std::exp(s) + 4);
    std::vector<float> want(T, float(cold));
    want[1 + target] = float(hot);
    EXPECT_TRUE(test::close_rel_max("class token's attention row", attn.data(), want.data(), T, 1e-5));
    for (const char* method : {"cls", "rollout"}) {
      const std::vector<float> map = viz::attention_map(attn.data(), c, 1, 0, method, 0, -1);
      ASSERT_EQ(map.size(), 4u);
      EXPECT_EQ(std::max_element(map.begin(), map.end()) - map.begin(), target) << method;
    }
    // Rollout of one block: the class token's row of (A + I) / 2.
    const auto r = viz::attention_map(attn.data(), c, 1, 0, "rollout", 0, -1);
    EXPECT_NEAR(r[target], hot / 2, 1e-6);
    EXPECT_NEAR(r[(target + 1) % 4], cold / 2, 1e-6);
  }
}

TEST(Attention, RolloutOfIdentityAttentionIsTheIdentity) {
  const int64_t L = 4, H = 3, T = 6;
  std::vector<float> probs(L * H * T * T, 0.f);
  for (int64_t lh = 0; lh < L * H; ++lh)
    for (int64_t i = 0; i < T; ++i) probs[lh * T * T + i * T + i] = 1.f;
  std::vector<float> eye(T * T, 0.f);
  for (int64_t i = 0; i < T; ++i) eye[i * T + i] = 1.f;
  for (int64_t head : {-1, 0, 2}) {
    const auto r = viz::attention_rollout(probs.data(), L, H * T * T, H, T, head);
    EXPECT_TRUE(test::close_rel_max("rollout of identity attention", r.data(), eye.data(), T * T, 0.0));
  }
}

TEST(Attention, RolloutMultipliesLaterLayersOnTheLeft) {
  // Two layers on T = 2 tokens, one head. A1 = [[0,1],[1,0]] -> A1' = [[.5,.5],[.5,.5]];
  // A2 = I -> A2' = I. R = A2' A1' = A1'. Swapping the order changes nothing here, so use
  // A2 = [[1,0],[1,0]] -> A2' = [[1,0],[.5,.5]]: R = A2' A1' = [[.5,.5],[.5,.5]], while
  // A1' A2' would be [[.75,.25],[.75,.25]].
  const std::vector<float> probs = {0, 1, 1, 0, 1, 0, 1, 0};
  const auto r = viz::attention_rollout(probs.data(), 2, 4, 1, 2, -1);
  const std::vector<float> want = {.5f, .5f, .5f, .5f};
  EXPECT_TRUE(test::close_rel_max("rollout", r.data(), want.data(), 4, 1e-7));
}

TEST(Attention, HeadsAreAveragedOrPicked) {
  const std::vector<float> probs = {1, 0, 0, 1, 0, 1, 1, 0};  // H = 2, T = 2
  const auto mean = viz::head_attention(probs.data(), 2, 2, -1);
  const auto h1 = viz::head_attention(probs.data(), 2, 2, 1);
  const std::vector<float> want_mean = {.5f, .5f, .5f, .5f}, want_h1 = {0, 1, 1, 0};
  EXPECT_TRUE(test::close_rel_max("mean of heads", mean.data(), want_mean.data(), 4, 0.0));
  EXPECT_TRUE(test::close_rel_max("head 1", h1.data(), want_h1.data(), 4, 0.0));
  EXPECT_NE(test::error_of([&] { viz::head_attention(probs.data(), 2, 2, 2); }).find("out of range"),
            std::string::npos);
}

TEST(Attention, AvgPooledModelsUseTheMeanOfThePatchRows) {
  ViTConfig c = tiny_config();
  c.global_pool = "avg";
  const int64_t T = c.num_tokens();  // 5: cls + 4 patches
  std::vector<float> a(T * T, 0.f);
  a[0 * T + 4] = 1;                 // the class token's row is ignored
  a[1 * T + 1] = a[2 * T + 1] = 1;  // two patch rows look at patch 0
  a[3 * T + 2] = a[4 * T + 3] = 1;  // one at patch 1, one at patch 2
  const auto map = viz::patch_map(a, c);
  const std::vector<float> want = {.5f, .25f, .25f, 0.f};
  EXPECT_TRUE(test::close_rel_max("avg-pool map", map.data(), want.data(), 4, 1e-7));
  // With pool_include_prefix the class token is pooled too: its row counts, one of five.
  c.pool_include_prefix = true;
  const auto with_prefix = viz::patch_map(a, c);
  const std::vector<float> want_prefix = {.4f, .2f, .2f, .2f};
  EXPECT_TRUE(
      test::close_rel_max("avg-pool map with prefix", with_prefix.data(), want_prefix.data(), 4, 1e-6));
}

// DeiT: "cls" reads the class token's row, "dist" the distillation token's (row 1); the
// patches start after both.
TEST(Attention, DistReadsTheDistillationTokensRow) {
  ViTConfig c = tiny_config();
  c.dist_token = c.head_dist = true;
  const int64_t T = c.num_tokens(), H = c.num_heads;  // 6: cls, dist + 4 patches
  std::vector<float> attn(c.depth * H * T * T, 0.f);
  for (int64_t h = 0; h < H; ++h) {
    attn[(h * T + 0) * T + 2 + 3] = 1;  // the class token looks at patch 3
    attn[(h * T + 1) * T + 2 + 1] = 1;  // the distillation token at patch 1
  }
  const auto cls = viz::attention_map(attn.data(), c, 1, 0, "cls", 0, -1);
  const auto dist = viz::attention_map(attn.data(), c, 1, 0, "dist", 0, -1);
  EXPECT_EQ(cls, (std::vector<float>{0, 0, 0, 1}));
  EXPECT_EQ(dist, (std::vector<float>{0, 1, 0, 0}));
  const std::string msg =
      test::error_of([&] { viz::attention_map(attn.data(), tiny_config(), 1, 0, "dist", 0, -1); });
  EXPECT_NE(msg.find("no distillation token"), std::string::npos) << msg;
}

// The attention pool (global_pool 'map'): infer gives its query's probabilities beside the
// blocks' with the same logits (zero on the register token, which the pool does not read);
// "pool" reads them over the patches, "rollout" carries them
// through the blocks; a model without the pool refuses "pool".
TEST(Attention, PoolMapsTheAttentionPoolsQuery) {
  ViTConfig c = tiny_config(2);
  c.num_heads = 2;
  c.global_pool = "map";
  c.class_token = false;
  c.reg_tokens = 1;
  ViT m(c);
  m.init_weights(7);
  const int64_t B = 2, T = c.num_tokens(), H = c.num_heads, N = c.num_patches();
  const auto x = test::randn(B * 64, 1);
  std::vector<float> plain(B * 3), with(B * 3), attn(c.depth * B * H * T * T), pool(B * H * T, -1.f);
  m.infer(x.data(), B, nullptr, plain.data());
  m.infer(x.data(), B, nullptr, with.data(), attn.data(), pool.data());
  EXPECT_TRUE(
      test::close_rel_max("logits with the pool's probabilities", with.data(), plain.data(), B * 3, 0.0));
  for (int64_t r = 0; r < B * H; ++r) {
    double sum = 0;
    for (int64_t t = 0; t < T; ++t) sum += pool[r * T + t];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "pool row " << r;
    EXPECT_EQ(pool[r * T], 0.f) << "pool row " << r << ": timm 1.0's pool leaves the register token out";
  }
  // Image 1, head 1 looks at patch 2 alone; head 0 at the register token and patch 0.
  std::fill(pool.begin(), pool.end(), 0.f);
  pool[(1 * H + 1) * T + 1 + 2] = 1.f;
  pool[(1 * H + 0) * T + 0] = pool[(1 * H + 0) * T + 1] = 0.5f;
  EXPECT_EQ(viz::attention_map(attn.data(), c, B, 1, "pool", 0, 1, pool.data()),
            (std::vector<float>{0, 0, 1, 0}));
  EXPECT_EQ(viz::attention_map(attn.data(), c, B, 1, "pool", 0, -1, pool.data()),
            (std::vector<float>{0.25f, 0, 0.5f, 0}));
  // Rollout through identity blocks (each token on itself) leaves the pool's row as it is.
  std::fill(attn.begin(), attn.end(), 0.f);
  for (int64_t l = 0; l < c.depth; ++l)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) attn[(((l * B + b) * H + h) * T + t) * T + t] = 1.f;
  const auto rolled = viz::attention_map(attn.data(), c, B, 1, "rollout", 1, 1, pool.data());
  ASSERT_EQ(int64_t(rolled.size()), N);
  EXPECT_TRUE(test::close_rel_max("rollout to the pool", rolled.data(), std::vector<float>{0, 0, 1, 0}.data(),
                                  N, 1e-6));
  const std::string msg =
      test::error_of([&] { viz::attention_map(attn.data(), tiny_config(), 1, 0, "pool", 0, -1); });
  EXPECT_NE(msg.find("no attention pool"), std::string::npos) << msg;
}

TEST(Attention, UpsampledMapIsNormalizedToZeroOne) {
  const auto m = viz::upsample_normalized({0.f, 1.f, 2.f, 3.f}, 2, 2, 8, 8);
  EXPECT_FLOAT_EQ(*std::min_element(m.begin(), m.end()), 0.f);
  EXPECT_FLOAT_EQ(*std::max_element(m.begin(), m.end()), 1.f);
  EXPECT_EQ(m[0], 0.f);   // top-left holds the smallest patch
  EXPECT_EQ(m[63], 1.f);  // bottom-right the largest
  const auto flat = viz::upsample_normalized({2.f, 2.f, 2.f, 2.f}, 2, 2, 4, 4);
  EXPECT_EQ(*std::max_element(flat.begin(), flat.end()), 0.f);
  // Uniform attention as float sums leave it: the last bits differ. It is flat, not stretched
  // into stripes that fill the colour range.
  const float q = 0.25f;
  const auto rounded =
      viz::upsample_normalized({q, std::nextafter(q, 1.f), q, std::nextafter(q, 0.f)}, 2, 2, 4, 4);
  EXPECT_EQ(*std::max_element(rounded.begin(), rounded.end()), 0.f);
  // A small real difference is still drawn.
  const auto small = viz::upsample_normalized({q, q * 1.001f, q, q}, 2, 2, 4, 4);
  EXPECT_FLOAT_EQ(*std::max_element(small.begin(), small.end()), 1.f);
  // A grid covering the top-left 6x4 of 8x8 (a size past a multiple of the patch): the map is
  // drawn there, as the same map on a 6x4 image, and the unread pixels are the lowest.
  const auto covered = viz::upsample_normalized({0.f, 1.f, 2.f, 3.f}, 2, 2, 8, 8, 0.75, 0.5);
  const auto alone = viz::upsample_normalized({0.f, 1.f, 2.f, 3.f}, 2, 2, 6, 4);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x)
      EXPECT_EQ(covered[y * 8 + x], y < 6 && x < 4 ? alone[y * 4 + x] : 0.f) << y << "," << x;
}

TEST(Figures, AttentionFigureIsAPngWithTheHeatmapBrightWhereTheMapPeaks) {
  VIT_REQUIRE_CAIRO();
  test::TempDir tmp("viz");
  Image view{28, 28, 1, std::vector<uint8_t>(28 * 28, 128)};
  const std::string path = tmp / "a.png";
  viz::attention_figure(view, {1.f, 0.f, 0.f, 0.f}, 2, 2, "digit: 7 99.0%", path);  // peak: top-left patch
  const Image png = read_image(path);
  // Three 196-pixel panels (28 x 7) with 12-pixel margins, 40 above, 30 below.
  EXPECT_EQ(png.w, 3 * 196 + 4 * 12);
  EXPECT_EQ(png.h, 40 + 196 + 30);
  auto px = [&](int64_t x, int64_t y) { return &png.px[(y * png.w + x) * png.c]; };
  const int64_t hx = 12 + 196 + 12, top = 40;     // the heatmap panel
  const uint8_t* hot = px(hx + 2, top + 2);       // viridis(1): #FDE725
  const uint8_t* cold = px(hx + 193, top + 193);  // viridis(0): #440154
  EXPECT_EQ(hot[0], 0xFD);
  EXPECT_EQ(hot[1], 0xE7);
  EXPECT_EQ(cold[0], 0x44);
  EXPECT_EQ(cold[2], 0x54);
  // The caption is drawn: dark pixels in the strip above the panels.
  int dark = 0;
  for (int64_t y = 0; y < top; ++y)
    for (int64_t x = 0; x < png.w; ++x) dark += px(x, y)[0] < 100;
  EXPECT_GT(dark, 50);
}

TEST(Figures, PosEmbedSimilarityIsOneOnTheDiagonalAndSymmetric) {
  const std::vector<float> pos = {1, 0, 0, 1, 1, 1, -1, 0};  // N = 4, D = 2
  const auto s = viz::pos_embed_similarity(pos.data(), 4, 2);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(s[i * 4 + i], 1.f, 1e-6);
  EXPECT_NEAR(s[0 * 4 + 1], 0.f, 1e-7);  // orthogonal
  EXPECT_NEAR(s[0 * 4 + 2], 1 / std::sqrt(2.f), 1e-6);
  EXPECT_NEAR(s[0 * 4 + 3], -1.f, 1e-6);  // opposite
  EXPECT_EQ(s[2 * 4 + 3], s[3 * 4 + 2]);
  if (!viz::canvas_available()) return;  // the similarities above are checked in any build
  test::TempDir tmp("viz");
  viz::pos_embed_figure(pos.data(), 2, 2, 2, "t", tmp / "p.png");
  EXPECT_GT(read_image(tmp / "p.png").w, 100);
}

TEST(Figures, SummaryCsvIsReadAndBadFilesNameTheProblem) {
  test::TempDir tmp("viz");
  std::ofstream(tmp / "summary.csv")
      << "epoch,train_loss,train_top1,eval_loss,eval_top1,eval_top5,lr,seconds\n"
         "1,2.0,0.3,1.5,0.5,0.9,0.001,3.5\n2,1.0,0.6,0.9,0.7,0.95,0.0005,3.4\n";
  const viz::RunHistory h = viz::read_summary_csv(tmp / "summary.csv");
  ASSERT_EQ(h.epoch.size(), 2u);
  EXPECT_EQ(h.eval_top1[1], 0.7);
  EXPECT_TRUE(h.ema_eval_top1.empty());
  // A run with a model EMA: its evaluation is read too, and drawn beside the model's (it was
  // left out of the curves).
  std::ofstream(tmp / "ema.csv") << "epoch,train_loss,train_top1,eval_loss,eval_top1,eval_top5,ema_eval_loss,"
                                    "ema_eval_top1,ema_eval_top5,lr,"
                                    "seconds\n1,2.0,0.3,1.5,0.5,0.9,1.6,0.4,0.8,0.001,3.5\n2,1.0,0.6,0.9,0.7,"
                                    "0.95,0.8,0.75,0.96,0.0005,3.4\n";
  const viz::RunHistory e = viz::read_summary_csv(tmp / "ema.csv");
  EXPECT_EQ(e.ema_eval_top1, (std::vector<double>{0.4, 0.75}));
  EXPECT_EQ(e.ema_eval_loss, (std::vector<double>{1.6, 0.8}));
  if (viz::canvas_available()) {  // the drawing; the reading below is checked in any build
    viz::curves_figure(h, "run", tmp / "c.png");
    EXPECT_EQ(read_image(tmp / "c.png").w, 1200);
  }
  std::ofstream(tmp / "bad.csv") << "epoch,train_loss,train_top1,eval_loss,eval_top1,lr\n1,2.0,x,1,1,1\n";
  EXPECT_NE(
      test::error_of([&] { viz::read_summary_csv(tmp / "bad.csv"); }).find("bad.csv:2: column train_top1"),
      std::string::npos);
  std::ofstream(tmp / "nocol.csv") << "epoch,train_loss\n";
  EXPECT_NE(test::error_of([&] { viz::read_summary_csv(tmp / "nocol.csv"); }).find("no column 'train_top1'"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { viz::read_summary_csv(tmp / "none.csv"); }).find("none.csv: cannot open"),
            std::string::npos);
}

TEST(Figures, ConfusionMatrixPngAndAFailedWriteNamesTheFile) {
  VIT_REQUIRE_CAIRO();
  test::TempDir tmp("viz");
  viz::confusion_figure({5, 1, 0, 2, 7, 1, 0, 0, 9}, 3, {"cat", "dog", "bird"}, "c", tmp / "m.png");
  EXPECT_GT(read_image(tmp / "m.png").w, 0);
  const std::string bad = tmp / "no/such/dir/m.png";
  EXPECT_NE(test::error_of([&] { viz::confusion_figure({1}, 1, {}, "c", bad); }).find(bad),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(bad));
}

// A build without cairo says so, and writes no file.
TEST(Figures, WithoutCairoDrawingIsAClearError) {
  if (viz::canvas_available()) GTEST_SKIP() << "built with cairo: Figures.* check the pictures";
  test::TempDir tmp("viz");
  EXPECT_NE(test::error_of([&] {
              viz::confusion_figure({1}, 1, {}, "c", tmp / "m.png");
            }).find("built without cairo (VIT_CAIRO=OFF): it draws no pictures"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(tmp / "m.png"));
}

TEST(Plot, NiceTicksAreRoundAndCoverTheRange) {
  const auto t = viz::nice_ticks(0.013, 0.87, 5);
  EXPECT_LE(t.front(), 0.013);
  EXPECT_GE(t.back(), 0.87 - 1e-12);
  EXPECT_NEAR(t[1] - t[0], 0.2, 1e-12);
  EXPECT_EQ(viz::tick_label(0.4, 0.2), "0.4");
  EXPECT_EQ(viz::tick_label(20, 5), "20");
  EXPECT_EQ(viz::tick_label(0.0005, 0.0001), "5e-04");
  EXPECT_GE(viz::nice_ticks(3, 3, 5).size(), 2u);  // one value still gets an axis
  // A constant series (lr 0.005) gets an axis of its own scale with its value as a tick.
  const auto c = viz::nice_ticks(0.005, 0.005, 5);
  EXPECT_GT(c.front(), 0.0);
  EXPECT_LT(c.back(), 0.01);
  EXPECT_TRUE(std::any_of(c.begin(), c.end(), [](double v) { return std::fabs(v - 0.005) < 1e-12; }));
  EXPECT_EQ(viz::tick_label(0.005, c[1] - c[0]), "0.005");
  // One style for an axis: an lr axis up to 0.001 in steps of 2e-4 read "8e-04" beside
  // "0.0010"; small axes are scientific throughout, with the step's digits.
  const std::vector<double> lr = {0.0002, 0.0004, 0.0006, 0.0008, 0.0010};
  std::vector<std::string> got;
  for (double v : lr) got.push_back(viz::tick_label(v, 0.0002, viz::axis_magnitude(lr)));
  EXPECT_EQ(got, (std::vector<std::string>{"0.0002", "0.0004", "0.0006", "0.0008", "0.0010"}));
  const std::vector<double> small = {0.00005, 0.0001, 0.00015};
  got.clear();
  for (double v : small) got.push_back(viz::tick_label(v, 0.00005, viz::axis_magnitude(small)));
  EXPECT_EQ(got, (std::vector<std::string>{"5.0e-05", "1.0e-04", "1.5e-04"}));
}

}  // namespace
}  // namespace vit
