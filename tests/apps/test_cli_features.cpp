// vit predict --features: embeddings of images or tensor rows to .npy or .safetensors, and
// models without a head, which give features and nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/pretrained.h"
#include "io/safetensors.h"
#include "support/models.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {
using vit::test::Result;
using vit::test::run;
const std::string digit = std::string(VIT_FIXTURE_DIR) + "/digit_7.png";
}  // namespace

TEST(CliFeatures, PooledAndTokenFeaturesOfImagesToNpyAndSafetensors) {
  vit::test::TempDir tmp("features");
  const std::string ck = tmp / "run";
  Result r = run(
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 32 --threads 1 --output " + ck);
  ASSERT_EQ(r.code, 0) << r.out;
  const vit::ViTConfig cfg = vit::load_pretrained(ck).model->config();
  const int64_t D = cfg.embed_dim, T = cfg.num_tokens();

  r = run("predict --checkpoint " + ck + " --features -o " + (tmp / "f.safetensors") + " " + digit + " " +
          digit);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote pooled features [2, " + std::to_string(D) + "] of 2 images"), std::string::npos)
      << r.out;
  const vit::SafeTensors st = vit::SafeTensors::open(tmp / "f.safetensors");
  ASSERT_EQ(st.at("features").shape, (vit::Shape{2, D}));
  const std::vector<float> f = st.to_float("features");
  EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + D), std::vector<float>(f.begin() + D, f.end()));
  EXPECT_EQ(st.metadata().at("inputs"), "[\"" + digit + "\",\"" + digit + "\"]");

  r = run("predict --checkpoint " + ck + " --features tokens --out " + (tmp / "t.npy") + " " + digit);
  ASSERT_EQ(r.code, 0) << r.out;
  // --json gives one JSON object here too (it printed the "wrote" line, which no JSON reader takes).
  const Result j =
      run("predict --checkpoint " + ck + " --features tokens --json --out " + (tmp / "j.npy") + " " + digit);
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_EQ(
      nlohmann::json::parse(vit::test::last_line(j.out)),
      (nlohmann::json{{"features", "tokens"}, {"shape", {1, T, D}}, {"count", 1}, {"out", tmp / "j.npy"}}))
      << j.out;
  const auto size = std::filesystem::file_size(tmp / "t.npy");
  EXPECT_EQ(size % 64, uint64_t(T * D * 4) % 64);  // a header of 64-byte blocks, then the tokens
  EXPECT_GT(size, uint64_t(T * D * 4));

  // Asked wrongly: each a one-line error, and no file written.
  for (const std::string& bad : std::vector<std::string>{"--features", "--out " + (tmp / "x.npy"),
                                                         "--features cls --out " + (tmp / "x.npy"),
                                                         "--features --out " + (tmp / "x.csv")}) {
    r = run("predict --checkpoint " + ck + " " + bad + " " + digit);
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.out.find("vit: "), std::string::npos) << bad << ": " << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "x.npy"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "x.csv"));
}

TEST(CliFeatures, AHeadlessCheckpointGivesFeaturesAndSaysWhyNotClasses) {
  vit::test::TempDir tmp("headless");
  vit::ViTConfig c = vit::test::tiny_vit();
  c.num_classes = 0;
  vit::ViT m(c);
  vit::export_timm(m, tmp / "model", {});
  const std::vector<float> x(3 * c.in_chans * c.img_h * c.img_w, 0.5f);
  vit::write_safetensors(tmp / "x.safetensors",
                         {{"x", {3, c.in_chans, c.img_h, c.img_w}, vit::DType::F32, x.data()}});
  const std::string args =
      "predict --checkpoint " + (tmp / "model") + " --tensor " + (tmp / "x.safetensors") + ":x";
  Result r = run(args + " --features -o " + (tmp / "f.npy"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[3, " + std::to_string(c.embed_dim) + "] of 3 rows"), std::string::npos) << r.out;
  r = run(args);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no classifier head"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--features"), std::string::npos) << r.out;
  // Fine-tuned on synthetic data without --num-classes: what a dataset directory says (it
  // was "synthetic dataset: sizes must be positive").
  r = run("train --pretrained " + (tmp / "model") + " --synthetic 8 --epochs 1 -b 8 --threads 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("the model has no classifier head (num_classes 0): set --num-classes K"),
            std::string::npos)
      << r.out;
}
