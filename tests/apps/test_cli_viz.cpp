// vit attention, vit plot and vit eval --confusion-png end to end: each writes PNG files
// that decode, and bad input fails with a message naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "data/image.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::Result;
using vit::test::run;

// A 2-epoch synthetic run (16x16 gray images, 4x4 patches: a 4x4 grid, 4 blocks of 2 heads).
class VizCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new vit::test::TempDir("viz_cli");
    const Result r =
        run("train --model mnist-seed --img-size 16 --patch-size 4 --depth 4 --num-heads 2 --synthetic 128 "
            "--epochs 2 "
            "-b 64 --threads 1 --output " +
            run_dir());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string run_dir() { return *dir_ / "run"; }
  static std::string ckpt() { return run_dir() + "/last.safetensors"; }
  static std::string digit() { return std::string(VIT_FIXTURE_DIR) + "/digit_7.png"; }
  static vit::test::TempDir* dir_;
};
vit::test::TempDir* VizCli::dir_ = nullptr;

TEST_F(VizCli, AttentionWritesOnePngPerImageForEachMethod) {
  const std::string out = *dir_ / "att";
  Result r = run("attention --checkpoint " + ckpt() + " --out " + out + " " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  // Three panels of the 16x16 input scaled by 12 (192 pixels) with 12-pixel margins.
  vit::Image png = vit::read_image(out + "/digit_7_cls.png");
  EXPECT_EQ(png.w, 3 * 192 + 4 * 12);
  EXPECT_NE(r.out.find("digit_7_cls.png (class-token attention)"), std::string::npos) << r.out;
  r = run("attention --method rollout --layer 1 --head 0 --checkpoint " + ckpt() + " --out " + out + " " +
          digit());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(vit::read_image(out + "/digit_7_rollout.png").w, 0);
  // --layer all: a grid of 4 blocks x (2 heads + mean); the same image twice gets two names.
  r = run("attention --layer all --checkpoint " + ckpt() + " --out " + out + " " + digit() + " " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  png = vit::read_image(out + "/digit_7_cls_grid.png");
  // 64-pixel cells (16 x 4): title strip 64 + 24, labels 22, 4 rows of 64 + 6, margin 12.
  EXPECT_EQ(png.h, 88 + 22 + 4 * 70 + 12);
  EXPECT_TRUE(fs::exists(out + "/digit_7_cls_grid-2.png")) << r.out;
  // --layer all --head 1: that head's column alone (--head was ignored), with the whole
  // caption (one column's width cut it to a few letters).
  r = run("attention --layer all --head 1 --checkpoint " + ckpt() + " --out " + out + "_h1 " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  const vit::Image one = vit::read_image(out + "_h1/digit_7_cls_grid.png");
  EXPECT_EQ(one.h, png.h);
  EXPECT_GT(one.w, 78 + 64 + 6 + 12) << "the caption's width";
  // Cell (block r, head 1) of the full grid is cell (r, 0) of this one: x = 78 + c * 70, y = 110 + r * 70.
  int64_t differ = 0;
  for (int64_t r4 = 0; r4 < 4; ++r4)
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x)
        for (int64_t k = 0; k < 3; ++k) {
          const auto at = [&](const vit::Image& im, int64_t c) {
            return im.px[size_t(((110 + r4 * 70 + y) * im.w + 78 + c * 70 + x) * im.c + k)];
          };
          differ += at(png, 1) != at(one, 0);
        }
  EXPECT_EQ(differ, 0) << "pixels of head 1's column that differ";
}

// A model with the attention pool (--pool map, SigLIP's) trains, and vit attention draws its
// query's attention by default, for a model without a head too; a model without the pool
// refuses --method pool.
TEST_F(VizCli, AttentionPoolModelTrainsAndDrawsThePoolsQuery) {
  const std::string run_map = *dir_ / "map_run", out = *dir_ / "att_map";
  Result r =
      run("train --model mnist-seed --img-size 16 --patch-size 4 --depth 2 --num-heads 2 --pool map "
          "--no-class-token --synthetic 64 --epochs 1 -b 32 --threads 1 --output " +
          run_map);
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("attention --checkpoint " + run_map + "/last.safetensors --out " + out + " " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(vit::read_image(out + "/digit_7_pool.png").w, 3 * 192 + 4 * 12);
  // --layer does not apply to the pool's query (documented as unused): a block the 2-block
  // model lacks is no error.
  r = run("attention --method pool --layer 7 --checkpoint " + run_map + "/last.safetensors --out " + out +
          "_l7 " + digit());
  EXPECT_EQ(r.code, 0) << r.out;
  r = run("attention --method rollout --layer all --checkpoint " + run_map + "/last.safetensors --out " +
          out + " " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(out + "/digit_7_rollout_grid.png")) << r.out;
  // Without a class token --method cls draws the pooled tokens' mean, and says so (it was
  // captioned "class-token attention").
  r = run("attention --method cls --checkpoint " + run_map + "/last.safetensors --out " + out + " " +
          digit());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("digit_7_cls.png (pooled tokens' mean attention)"), std::string::npos) << r.out;
  // A model without a head (transformers' SiglipVisionModel) draws its maps with no class named.
  r = run("attention --checkpoint " + std::string(VIT_FIXTURE_DIR) + "/pretrained/hf_siglip_vision --out " +
          out + "_hf " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("digit_7.png: no classifier head -> "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("digit_7_pool.png (attention-pool query)"), std::string::npos) << r.out;
  EXPECT_GT(vit::read_image(out + "_hf/digit_7_pool.png").w, 0) << r.out;
  r = run("attention --method pool --checkpoint " + ckpt() + " --out " + out + "_cls " + digit());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--method pool: the model has no attention pool"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out + "_cls")) << "nothing written before the error";
}

TEST_F(VizCli, AttentionFailsClearlyOnBadInput) {
  const std::string out = *dir_ / "bad";
  Result r = run("attention --checkpoint " + ckpt() + " --out " + out + " /nonexistent.png");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.png"), std::string::npos) << r.out;
  r = run("attention --layer 4 --checkpoint " + ckpt() + " --out " + out + " " + digit());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--layer 4 out of range: the model has 4"), std::string::npos) << r.out;
  r = run("attention --head x --checkpoint " + ckpt() + " --out " + out + " " + digit());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--head wants an index or 'mean', got 'x'"), std::string::npos) << r.out;
  r = run("attention --method grad --checkpoint " + ckpt() + " --out " + out + " " + digit());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("grad"), std::string::npos) << r.out;
  r = run("attention --method dist --checkpoint " + ckpt() + " --out " + out + "_dist " + digit());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--method dist: the model has no distillation token"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out + "_dist")) << "nothing written before the error";
  r = run("attention --checkpoint " + ckpt() + " --out " + digit() + " " + digit());  // --out is a file
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot create the output directory"), std::string::npos) << r.out;
}

// Folders (in timm's order), - for standard input, and --skip-bad-images, as vit predict
// takes them (attention took files alone: "a directory, where a file is meant").
TEST_F(VizCli, AttentionTakesFoldersStandardInputAndSkipsBadImagesOnRequest) {
  const std::string in = *dir_ / "images", out = *dir_ / "att_folder";
  fs::create_directories(in + "/sub");
  fs::copy_file(digit(), in + "/img10.png");
  fs::copy_file(digit(), in + "/sub/img2.png");
  std::ofstream(in + "/bad.png") << "not an image";
  Result r = run("attention --checkpoint " + ckpt() + " --out " + out + " " + in);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("bad.png: not a PNG or JPEG file (--skip-bad-images leaves such files out)"),
            std::string::npos)
      << r.out;
  r = run("attention --skip-bad-images --checkpoint " + ckpt() + " --out " + out + " " + in);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vit attention: 1 of 3 image(s) skipped"), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("img10_cls.png"), r.out.find("img2_cls.png")) << r.out;  // timm's order of paths
  EXPECT_GT(vit::read_image(out + "/img10_cls.png").w, 0);
  EXPECT_GT(vit::read_image(out + "/img2_cls.png").w, 0);
  r = run("attention --checkpoint " + ckpt() + " --out " + out + " - - < " + digit());
  EXPECT_EQ(r.code, 1) << r.out;  // one image there: a second - read it again, or nothing
  EXPECT_NE(r.out.find("- (standard input) is given more than once"), std::string::npos) << r.out;
  r = run("attention --checkpoint " + ckpt() + " --out " + out + " - < " + digit());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(vit::read_image(out + "/stdin_cls.png").w, vit::read_image(out + "/img10_cls.png").w);
}

TEST_F(VizCli, PlotDrawsCurvesAndPositionEmbeddings) {
  Result r = run("plot --run " + run_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(vit::read_image(run_dir() + "/curves.png").w, 1200);
  const std::string pos = *dir_ / "pos.png";
  r = run("plot --pos-embed --checkpoint " + ckpt() + " --out " + pos);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(vit::read_image(pos).w, 0);
  r = run("plot --run /nonexistent");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent/summary.csv: cannot open"), std::string::npos) << r.out;
  r = run("plot --pos-embed --checkpoint " + ckpt());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
  r = run("plot");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("give --run DIR"), std::string::npos) << r.out;
  // Pictures are PNG: a name that says another format is refused, before any work (x.svg got
  // a PNG under that name); one in capitals or without an extension is a PNG's.
  const std::pair<std::string, std::string> other[] = {
      {"plot --run " + run_dir() + " --out " + (*dir_ / "c.svg"), "--out " + (*dir_ / "c.svg")},
      {"plot --pos-embed --checkpoint " + ckpt() + " --out " + (*dir_ / "p.pdf"),
       "--out " + (*dir_ / "p.pdf")},
      {"eval --checkpoint " + ckpt() + " --data-dir /nonexistent --confusion-png " + (*dir_ / "m.JPG"),
       "--confusion-png " + (*dir_ / "m.JPG")}};
  for (const auto& [args, named] : other) {
    r = run(args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(named + ": pictures are drawn as PNG only, not "), std::string::npos) << r.out;
  }
  for (const char* name : {"C.PNG", "curves"}) {
    r = run("plot --run " + run_dir() + " --out " + (*dir_ / name));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_GT(vit::read_image(*dir_ / name).w, 0);
  }
}

}  // namespace
