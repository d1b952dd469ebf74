// The vit program end to end: help for every subcommand, a short synthetic training run
// that writes its run directory, and clear errors with a non-zero exit for bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "support/temp_dir.h"
#include "vit/core/file.h"

namespace {
namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;
};

Result run(const std::string& args) {
  const std::string cmd = std::string(VIT_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(p.release());
  return {WEXITSTATUS(status), out};
}
}  // namespace

TEST(Cli, HelpForEverySubcommand) {
  for (const char* sub : {"", "train", "eval", "predict", "info"}) {
    Result r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub << ": " << r.out;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
  EXPECT_NE(run("train --help").out.find("--batch-size"), std::string::npos);
}

TEST(Cli, ShortSyntheticTrainingRunWritesItsRunDirectory) {
  vit::test::TempDir tmp("cli");
  const fs::path dir = fs::path(tmp.str()) / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 256 --epochs 2 -b 64 --threads 1 --output " +
          dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* f : {"config.json", "summary.csv", "last.safetensors", "best.safetensors"})
    EXPECT_TRUE(fs::exists(dir / f)) << f << "\n" << r.out;
  // Predict on an image written by `vit samples`-style PNG output: JSON lines with top-k.
  Result pred = run("predict --json --topk 3 --checkpoint " + (dir / "last.safetensors").string() + " " +
                    std::string(VIT_FIXTURE_DIR) + "/digit_7.png");
  ASSERT_EQ(pred.code, 0) << pred.out;
  EXPECT_NE(pred.out.find("\"topk\":[{\"index\":"), std::string::npos) << pred.out;
  EXPECT_NE(pred.out.find("\"prob\":"), std::string::npos) << pred.out;
  Result bad = run("predict --checkpoint " + (dir / "last.safetensors").string() + " /nonexistent.png");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("/nonexistent.png"), std::string::npos) << bad.out;
  Result info = run("info --checkpoint " + (dir / "last.safetensors").string());
  EXPECT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("\"img_size\""), std::string::npos) << info.out;
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroExit) {
  Result r = run("train --synthetic 10 --img-size 30 --patch-size 4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not divisible by patch size"), std::string::npos) << r.out;
  r = run("train --synthetic 10 --embed-dim 10 --num-heads 3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("does not divide embed_dim"), std::string::npos) << r.out;
  r = run("train --synthetic 10 -b 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("batch size must be positive"), std::string::npos) << r.out;
  r = run("train --synthetic 10 --lr -1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("learning rate must be positive"), std::string::npos) << r.out;
  r = run("train --model nope --synthetic 10");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("unknown model preset 'nope'"), std::string::npos) << r.out;
  r = run("info --checkpoint /nonexistent.safetensors");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.safetensors"), std::string::npos) << r.out;
  r = run("eval --checkpoint /nonexistent.safetensors --data-dir /");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.safetensors"), std::string::npos) << r.out;
}

TEST(Cli, CifarSeedRecipeRunsEndToEndOnCifarFormatFiles) {
  // Seed 002's recipe (cifar-seed model, Adam, crop + flip, early stopping) on a small
  // CIFAR-10 binary dataset written here: 64 training and 16 test images.
  vit::test::TempDir data("cifar_data"), out("cifar_run");
  auto batch = [](int n, int seed) {
    std::string b;
    for (int i = 0; i < n; ++i) {
      b.push_back(char((i + seed) % 10));
      for (int k = 0; k < 3072; ++k) b.push_back(char((k * 7 + i * 13 + seed) % 256));
    }
    return b;
  };
  for (int k = 1; k <= 5; ++k)
    std::ofstream(data / ("data_batch_" + std::to_string(k) + ".bin"), std::ios::binary) << batch(13, k);
  std::ofstream(data / "test_batch.bin", std::ios::binary) << batch(16, 0);
  Result r =
      run("train --recipe cifar-seed --data-dir " + data.str() + " --epochs 2 -b 32 --output " + out.str());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("65 images"), std::string::npos) << r.out;
  const std::string summary = vit::read_text_file(out / "summary.csv");
  EXPECT_NE(summary.find("\n2,"), std::string::npos) << summary;
  const std::string args = vit::read_text_file(out / "args.json");
  EXPECT_NE(args.find("\"--crop-pad\""), std::string::npos) << "the recipe's flags are recorded: " << args;
  Result ev = run("eval --json --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str());
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_NE(ev.out.find("\"count\":16"), std::string::npos) << ev.out;
  EXPECT_NE(ev.out.find("\"confusion\":[["), std::string::npos) << ev.out;
}
