// vit train's log with stdout redirected (a file, as `vit train ... > log`): the first line
// (model, data, threads) comes before the model is built, and every line is there as soon as
// it is printed, not when a buffer fills or the program ends.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "core/file.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace {
using Clock = std::chrono::steady_clock;

// What the log holds so far ("" before the child has created it).
std::string read_so_far(const std::string& path) {
  return std::filesystem::exists(path) ? vit::read_text_file(path) : "";
}
}  // namespace

TEST(TrainLog, ARedirectedLogShowsEachLineAsItIsPrinted) {
  vit::test::TempDir tmp("train_log");
  const std::string log = tmp / "log";
  // ViT-S/16 at batch 1 on one thread: 256 steps, a minute or more before the first epoch
  // ends; nothing after the line before the first step can be printed in that time.
  const pid_t pid = vit::test::spawn(VIT_BINARY,
                                     "train --model vit-small-16 --synthetic 256 -b 1 --epochs 1 --threads 1 "
                                     "--log-every 1000 --output " +
                                         (tmp / "run"),
                                     {log});
  const auto start = Clock::now();
  std::string out;
  while ((out = read_so_far(log)).find("training synthetic(256 samples") == std::string::npos &&
         Clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  int status = 0;
  const bool alive = ::waitpid(pid, &status, WNOHANG) == 0;
  if (alive) ::kill(pid, SIGKILL);
  vit::test::wait_for(pid, log);
  ASSERT_TRUE(alive) << "the run ended before its lines were seen: " << out;
  // The first line, then the one while the 22M weights are drawn, then the run's own.
  EXPECT_EQ(
      out.rfind("vit train: model vit-small-16 (22.1M parameters), data 256 synthetic samples, threads: 1\n"
                "initialising 22.1M parameters (seed 42)\n"
                "model: 224x224x3 images, 16x16 patches (196), 12 blocks of width 384, 6 heads, MLP 1536, "
                "class-token pooling, 1000 classes\n",
                0),
      0u)
      << out;
  EXPECT_NE(out.find("training synthetic(256 samples"), std::string::npos)
      << "not there within a minute: " << out;
  EXPECT_EQ(out.find("epoch 1/1"), std::string::npos) << out;
}
