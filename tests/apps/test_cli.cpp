// The vit program end to end: help for every subcommand, a short synthetic training run
// that writes its run directory, and clear errors with a non-zero exit for bad input.
#include <sched.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "data/image.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"
#include "train/run_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::Result;
using vit::test::run;
using vit::test::run_vit;
}  // namespace

TEST(Cli, HelpForEverySubcommand) {
  for (const char* sub :
       {"", "train", "eval", "predict", "info", "export", "average", "attention", "plot", "bench"}) {
    Result r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub << ": " << r.out;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
  EXPECT_NE(run("train --help").out.find("--batch-size"), std::string::npos);
}

// vit starts itself again to set OpenMP's spinning, which valgrind refused ("You cannot run
// '/proc/self/exe' directly") and heaptrack lost track of: under them it does not.
TEST(Cli, RunsUnderValgrind) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "valgrind cannot run an AddressSanitizer build";
#endif
  if (std::system("command -v valgrind > /dev/null 2>&1") != 0) GTEST_SKIP() << "no valgrind";
  Result r = run_vit("--version", "valgrind -q");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vitcpp "), std::string::npos) << r.out;
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
  // The run ends by naming its best epoch, as timm does: the first with the highest eval top-1.
  std::istringstream csv(vit::read_text_file((dir / "summary.csv").string()));
  std::string line;
  std::getline(csv, line);  // epoch,train_loss,train_top1,eval_loss,eval_top1,...
  double best = -1;
  int best_epoch = 0;
  for (int epoch; std::getline(csv, line);) {
    double train_loss, train_top1, eval_loss, eval_top1;
    ASSERT_EQ(std::sscanf(line.c_str(), "%d,%lf,%lf,%lf,%lf", &epoch, &train_loss, &train_top1, &eval_loss,
                          &eval_top1),
              5)
        << line;
    if (eval_top1 > best) best = eval_top1, best_epoch = epoch;
  }
  char want[96];
  std::snprintf(want, sizeof want, "\nbest: eval top-1 %.2f%% at epoch %d of 2 (best.safetensors)\n", best,
                best_epoch);
  EXPECT_NE(r.out.find(want), std::string::npos) << want << r.out;
  // Without --output no file is named.
  Result bare = run("train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 64 --threads 1");
  ASSERT_EQ(bare.code, 0) << bare.out;
  EXPECT_NE(bare.out.find("\nbest: eval top-1 "), std::string::npos) << bare.out;
  EXPECT_EQ(bare.out.find("(best.safetensors)"), std::string::npos) << bare.out;
  // Predict on an image written by `vit samples`-style PNG output: JSON lines with top-k.
  Result pred = run("predict --json --topk 3 --checkpoint " + (dir / "last.safetensors").string() + " " +
                    std::string(VIT_FIXTURE_DIR) + "/digit_7.png");
  ASSERT_EQ(pred.code, 0) << pred.out;
  EXPECT_NE(pred.out.find("\"topk\":[{\"index\":"), std::string::npos) << pred.out;
  EXPECT_NE(pred.out.find("\"prob\":"), std::string::npos) << pred.out;
  Result bad = run("predict --checkpoint " + (dir / "last.safetensors").string() + " /nonexistent.png");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("/nonexistent.png"), std::string::npos) << bad.out;
  // --tensor FILE:NAME: one JSON line per row; equal rows give equal logits; bad specs and
  // shapes are errors that say what was wanted.
  std::vector<float> x(3 * 16 * 16);
  for (size_t i = 0; i < 256; ++i) x[i] = x[512 + i] = float(i % 7) - 3.f, x[256 + i] = 1.f;
  const std::string xs = (fs::path(tmp.str()) / "x.safetensors").string();
  vit::write_safetensors(
      xs, {{"x", {3, 1, 16, 16}, vit::DType::F32, x.data()}, {"flat", {768}, vit::DType::F32, x.data()}});
  const std::string ck = " --checkpoint " + (dir / "last.safetensors").string();
  Result rows = run("predict --json --logits" + ck + " --tensor " + xs + ":x");
  ASSERT_EQ(rows.code, 0) << rows.out;
  std::vector<nlohmann::json> lines;
  for (size_t at = 0, nl; (nl = rows.out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(nlohmann::json::parse(rows.out.substr(at, nl - at)));
  ASSERT_EQ(lines.size(), 3u) << rows.out;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(lines[i]["row"], i);
  EXPECT_EQ(lines[0]["logits"], lines[2]["logits"]);
  EXPECT_NE(lines[0]["logits"], lines[1]["logits"]);
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {xs, "wants FILE.safetensors:NAME"},
           {xs + ":", "no tensor name after the colon"},
           {xs + ":nope", "no tensor named 'nope'"},
           {xs + ":flat", "shape [768], the model takes [B, 1, 16, 16]"}}) {
    Result e = run("predict" + ck + " --tensor " + spec);
    EXPECT_NE(e.code, 0) << spec;
    EXPECT_NE(e.out.find(says), std::string::npos) << spec << ": " << e.out;
  }
  Result info = run("info --checkpoint " + (dir / "last.safetensors").string());
  EXPECT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("\"img_size\""), std::string::npos) << info.out;
}

// --checkpoint-hist keeps the best epochs' weights, says which, and vit average makes one
// checkpoint of them that the other commands read.
TEST(Cli, CheckpointHistoryAndItsAverage) {
  vit::test::TempDir tmp("cli_hist");
  const fs::path dir = fs::path(tmp.str()) / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 256 --epochs 4 -b 64 --threads 1 "
          "--checkpoint-hist 2 --output " +
          dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto epochs = vit::checkpoint_epochs(dir.string());
  ASSERT_EQ(epochs.size(), 2u) << r.out;
  for (int64_t e : epochs) {
    const auto meta = vit::read_safetensors_metadata((dir / vit::checkpoint_name(e)).string());
    EXPECT_EQ(meta.at("epoch"), std::to_string(e));
    EXPECT_NE(r.out.find(vit::checkpoint_name(e) + " ("), std::string::npos) << r.out;
    EXPECT_TRUE(meta.count("eval_top1") && meta.count("train_top1"));
  }
  EXPECT_NE(r.out.find("average them with: vit average " + dir.string()), std::string::npos) << r.out;
  const std::string avg = (fs::path(tmp.str()) / "avg.safetensors").string();
  Result a = run("average " + dir.string() + " -o " + avg);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("averaging 2 checkpoint(s):"), std::string::npos) << a.out;
  const auto meta = vit::read_safetensors_metadata(avg);
  EXPECT_EQ(meta.at("averaged_from"), nlohmann::json({(dir / vit::checkpoint_name(epochs[0])).string(),
                                                      (dir / vit::checkpoint_name(epochs[1])).string()})
                                          .dump());
  Result one = run("average " + dir.string() + " -n 1 -o " + avg);
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("the best by eval_top1 of 2"), std::string::npos) << one.out;
  Result pred = run("predict --checkpoint " + avg + " " + std::string(VIT_FIXTURE_DIR) + "/digit_7.png");
  EXPECT_EQ(pred.code, 0) << pred.out;
}

TEST(Cli, ProgressBarOrLogLinesAsAsked) {
  vit::test::TempDir tmp("progress");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 16 --threads 1 ";
  // Output is a pipe here: auto gives log lines, --progress bar forces the bar (for mpirun,
  // where every rank sees a terminal, --progress log is the way back).
  Result bar = run(base + "--progress bar --output " + (tmp / "a"));
  ASSERT_EQ(bar.code, 0) << bar.out;
  EXPECT_NE(bar.out.find("\r\033[2Kepoch 1/1 ["), std::string::npos) << bar.out;
  EXPECT_NE(bar.out.find("\r\033[2Kepoch 1/1 eval ["), std::string::npos)
      << "the eval's bar too: " << bar.out;
  Result log = run(base + "--log-every 2 --output " + (tmp / "b"));
  ASSERT_EQ(log.code, 0) << log.out;
  EXPECT_EQ(log.out.find("\033[2K"), std::string::npos) << log.out;
  EXPECT_NE(log.out.find("epoch 1/1 step 2/4 loss"), std::string::npos) << log.out;
  Result interval = run(base + "--log-interval 2 --output " + (tmp / "c"));  // timm's name
  ASSERT_EQ(interval.code, 0) << interval.out;
  EXPECT_NE(interval.out.find("epoch 1/1 step 2/4 loss"), std::string::npos) << interval.out;
  // The epochs' lines alone; each but the last says when the run ends.
  Result none =
      run("train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 -b 16 --threads 1 "
          "--progress none --log-every 1 --output " +
          (tmp / "d"));
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_EQ(none.out.find(" step "), std::string::npos) << none.out;
  EXPECT_EQ(none.out.find("\033[2K"), std::string::npos) << none.out;
  EXPECT_TRUE(std::regex_search(none.out, std::regex("epoch 1/2: train loss .* s, run ETA 0:0\\d\n")))
      << none.out;
  EXPECT_TRUE(std::regex_search(none.out, std::regex("epoch 2/2: train loss .* s\n"))) << none.out;
  Result bad = run(base + "--progress sometimes");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--progress"), std::string::npos) << bad.out;
}

TEST(Cli, ResumeTakesDisplayFlagsAnewAndRefusesTheRest) {
  vit::test::TempDir tmp("resume_flags");
  const std::string dir = tmp / "run";
  Result first =
      run("train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 16 --threads 1 "
          "--log-every 0 --output " +
          dir);
  ASSERT_EQ(first.code, 0) << first.out;
  // How the run is shown and how many threads it uses may change; what it computes may not.
  Result again = run("train --resume " + dir + " --threads 2 --progress bar --log-every 1");
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("threads: 2"), std::string::npos) << again.out;
  // Short and alias names replace the saved flag too (args.json keeps --workers, --log-every).
  Result alias = run("train --resume " + dir + " -j 2 --log-interval 3");
  EXPECT_EQ(alias.code, 0) << alias.out;
  Result lr = run("train --resume " + dir + " --lr 0.1");
  EXPECT_NE(lr.code, 0) << lr.out;
  EXPECT_NE(
      lr.out.find("only --threads, --workers, --comm-timeout, --progress, --log-every, --recovery-interval, "
                  "--epochs (to train longer) and --patience may be given (got --lr)"),
      std::string::npos)
      << lr.out;
}

// --shards N fixes the data-parallel split, so the thread count no longer changes the bits
// (tests/train/test_determinism.cpp checks the library); without it the split follows the
// threads. Dropout is on so that the masks' indices are exercised across shards too.
TEST(Cli, ShardsMakeTheRunTheSameOnAnyThreadCount) {
  vit::test::TempDir tmp("shards");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 16 --drop 0.1 --log-every 0 ";
  Result one = run(base + "--shards 2 --threads 1 --output " + (tmp / "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("batch split into 2 shards, one thread each (--shards"), std::string::npos)
      << one.out;
  ASSERT_EQ(run(base + "--shards 2 --threads 2 --output " + (tmp / "two")).code, 0);
  ASSERT_EQ(run(base + "--threads 1 --output " + (tmp / "default")).code, 0);  // one shard on 1 thread
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  EXPECT_TRUE(bytes(tmp / "one") == bytes(tmp / "two")) << "--shards 2: 1 and 2 threads differ";
  EXPECT_TRUE(bytes(tmp / "one") != bytes(tmp / "default")) << "--shards 2 on 1 thread was not applied";
  Result bad = run(base + "--shards -1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--shards"), std::string::npos) << bad.out;
}

// --opt-betas B1 B2 (timm's) sets Adam's betas: other betas, other weights; betas outside
// [0, 1) or a single value are refused.
TEST(Cli, OptBetasSetAdamsBetas) {
  vit::test::TempDir tmp("betas");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 16 --threads 1 --log-every 0 ";
  ASSERT_EQ(run(base + "--output " + (tmp / "a")).code, 0);
  ASSERT_EQ(run(base + "--opt-betas 0.9 0.999 --output " + (tmp / "b")).code, 0);
  Result other = run(base + "--opt-betas 0.5 0.9 --output " + (tmp / "c"));
  ASSERT_EQ(other.code, 0) << other.out;
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  EXPECT_EQ(bytes(tmp / "a"), bytes(tmp / "b"));  // the defaults are timm's 0.9 0.999
  EXPECT_NE(bytes(tmp / "a"), bytes(tmp / "c"));
  Result bad = run(base + "--opt-betas 0.9 1.5");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("betas must be in [0, 1)"), std::string::npos) << bad.out;
  EXPECT_NE(run(base + "--opt-betas 0.9").code, 0);
}

namespace {
// Trains `base` plus each run's flags into tmp/NAME and checks that every two runs ended with
// other weights (a flag that changed nothing would train the same bits); the runs' outputs.
std::map<std::string, Result> each_trains_other_weights(
    const vit::test::TempDir& tmp, const std::string& base,
    const std::vector<std::pair<std::string, std::string>>& runs) {
  std::map<std::string, Result> out;
  for (const auto& [name, flags] : runs) {
    out[name] = run(base + flags + " --output " + (tmp / name));
    EXPECT_EQ(out[name].code, 0) << flags << ": " << out[name].out;
  }
  auto bytes = [&](const std::string& name) { return vit::read_text_file(tmp / name + "/last.safetensors"); };
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = i + 1; j < runs.size(); ++j)
      EXPECT_NE(bytes(runs[i].first), bytes(runs[j].first))
          << runs[i].first << " and " << runs[j].first << " trained the same weights";
  return out;
}
}  // namespace

// timm's --bce-loss (with its threshold, positive weight and sum) and --clip-mode value and agc
// each change what trains, the log says so, and a run with them resumes to the bits of a run
// that was not stopped.
TEST(Cli, BceLossAndClipModesTrainAndResumeExactly) {
  vit::test::TempDir tmp("bce");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 -b 16 --threads 1 --log-every 0 "
      "--smoothing 0.1 --clip-grad 0.05 ";
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"ce", ""},
      {"bce", "--bce-loss"},
      {"bce_opts", "--bce-loss --bce-target-thresh 0.05 --bce-pos-weight 2 --bce-sum"},
      {"value", "--clip-mode value"},
      {"agc", "--clip-mode agc"},
  };
  for (const auto& [name, r] : each_trains_other_weights(tmp, base, runs)) {
    if (name.rfind("bce", 0) == 0) {
      EXPECT_TRUE(r.out.find(", binary cross-entropy") != std::string::npos) << r.out;
    }
    const std::string mode = name == "value" || name == "agc" ? name : "norm";
    EXPECT_TRUE(r.out.find(", " + mode + " clipping at 0.05") != std::string::npos) << r.out;
  }
  // One epoch, then --resume to the second: the straight run's bits (a constant lr: the
  // cosine's length follows --epochs), and the flags taken again from args.json.
  for (const std::string& flags : {runs[2].second, std::string("--clip-mode agc")}) {
    const std::string straight = tmp / "straight", resumed = tmp / "resumed";
    fs::remove_all(straight), fs::remove_all(resumed);
    ASSERT_EQ(run(base + flags + " --sched none --output " + straight).code, 0);
    ASSERT_EQ(run(base + flags + " --sched none --epochs 1 --output " + resumed).code, 0);
    Result again = run("train --resume " + resumed + " --epochs 2");
    ASSERT_EQ(again.code, 0) << again.out;
    EXPECT_TRUE(again.out.find(flags == runs[2].second ? ", binary cross-entropy"
                                                       : ", agc clipping at 0.05") != std::string::npos)
        << again.out;
    EXPECT_TRUE(bytes(resumed) == bytes(straight)) << flags << ": the resumed run differs";
  }
  Result bad = run(base + "--bce-loss --bce-pos-weight -1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--bce-pos-weight must be a finite number >= 0, got -1"), std::string::npos)
      << bad.out;
  Result mode = run(base + "--clip-mode rms");
  EXPECT_NE(mode.code, 0);
  EXPECT_NE(mode.out.find("--clip-mode"), std::string::npos) << mode.out;
}

// timm's --mixup-mode pair|elem, --cutmix-minmax and --mixup-off-epoch each change what
// trains; an off epoch past the run's end changes nothing and says so.
TEST(Cli, MixupModesMinMaxBoxesAndOffEpochTrainAsAsked) {
  vit::test::TempDir tmp("mixmodes");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 -b 16 --threads 1 --log-every 0 "
      "--mixup 0.8 --cutmix 1 ";
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  each_trains_other_weights(tmp, base,
                            {{"batch", ""},
                             {"pair", "--mixup-mode pair"},
                             {"elem", "--mixup-mode elem"},
                             {"minmax", "--cutmix-minmax 0.2 0.8"},
                             {"off", "--mixup-off-epoch 1"}});
  Result late = run(base + "--mixup-off-epoch 2 --output " + (tmp / "late"));
  ASSERT_EQ(late.code, 0) << late.out;
  EXPECT_TRUE(
      late.out.find("note: --mixup-off-epoch: no effect, the run ends before epoch 2 (counted from 0)") !=
      std::string::npos)
      << late.out;
  EXPECT_TRUE(bytes(tmp / "late") == bytes(tmp / "batch"));
  EXPECT_NE(run(base + "--cutmix-minmax 0.5 0.4").code, 0);
  EXPECT_NE(run(base + "--mixup-mode row").code, 0);
}

// timm's --aug-repeats (DeiT's repeated augmentation): an epoch of 512 of the 600 samples
// (each image 3 times), other weights than without, a resume to the bits of a run not
// stopped, and a set of fewer than 256 images refused.
TEST(Cli, AugRepeatsTrainsTimmsEpochsAndResumesExactly) {
  vit::test::TempDir tmp("aug_repeats");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 600 --epochs 2 -b 64 --threads 1 --log-every 0 "
      "--hflip 0.5 --sched none ";
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  const auto out = each_trains_other_weights(tmp, base, {{"plain", ""}, {"repeats", "--aug-repeats 3"}});
  EXPECT_NE(out.at("repeats").out.find("2 epochs of 8 steps"), std::string::npos) << out.at("repeats").out;
  EXPECT_NE(out.at("repeats").out.find("repeated augmentation (512 samples an epoch, each image 3 times)"),
            std::string::npos)
      << out.at("repeats").out;
  ASSERT_EQ(run(base + "--aug-repeats 3 --epochs 1 --output " + (tmp / "resumed")).code, 0);
  const Result again = run("train --resume " + (tmp / "resumed") + " --epochs 2");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(bytes(tmp / "resumed") == bytes(tmp / "repeats")) << "the resumed run differs";
  const Result small = run(base + "--aug-repeats 3 --synthetic 200");
  EXPECT_NE(small.code, 0);
  EXPECT_NE(small.out.find("--aug-repeats: timm's sampler takes the largest multiple of 256"),
            std::string::npos)
      << small.out;
}

// timm's 3-Augment (--aa 3a, which keeps --color-jitter), --color-jitter-prob, --grayscale-prob,
// --gaussian-blur-prob, --remode and --recount each change what trains (on RGB images: gray
// images have no color to take away), a run with them all resumes to the bits of one not
// stopped, and bad values get errors that name the flag.
TEST(Cli, TimmsPixelAugmentationsTrainAndResumeExactly) {
  vit::test::TempDir tmp("three_aug");
  const std::string base =
      "train --model mnist-seed --in-chans 3 --img-size 16 --synthetic 64 --epochs 2 -b 16 --threads 1 "
      "--log-every 0 ";
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  const auto out = each_trains_other_weights(tmp, base,
                                             {{"plain", ""},
                                              {"three", "--aa 3a"},
                                              {"three_mstd", "--aa 3a-mstd1"},
                                              {"three_jitter", "--aa 3a --color-jitter 0.4"},
                                              {"jitter", "--color-jitter 0.4"},
                                              {"jitter_half", "--color-jitter 0.4 --color-jitter-prob 0.5"},
                                              {"gray", "--grayscale-prob 0.5"},
                                              {"blur", "--gaussian-blur-prob 0.5"},
                                              {"erase", "--reprob 0.5"},
                                              {"erase_rand", "--reprob 0.5 --remode rand"},
                                              {"erase_const3", "--reprob 0.5 --remode const --recount 3"}});
  EXPECT_EQ(out.at("three_jitter").out.find("note: --color-jitter"), std::string::npos)
      << out.at("three_jitter").out;
  const std::string all =
      "--aa 3a-mstd0.5 --color-jitter 0.4 --color-jitter-prob 0.5 --grayscale-prob 0.3 --gaussian-blur-prob "
      "0.3 "
      "--reprob 0.5 --remode rand --recount 2 --sched none ";
  ASSERT_EQ(run(base + all + "--output " + (tmp / "straight")).code, 0);
  ASSERT_EQ(run(base + all + "--epochs 1 --output " + (tmp / "resumed")).code, 0);
  const Result again = run("train --resume " + (tmp / "resumed") + " --epochs 2");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(bytes(tmp / "resumed") == bytes(tmp / "straight")) << "the resumed run differs";
  for (const auto& [flags, error] : std::vector<std::pair<std::string, std::string>>{
           {"--gaussian-blur-prob 2", "--gaussian-blur-prob must be a probability"},
           {"--grayscale-prob -1", "--grayscale-prob must be a probability"},
           {"--color-jitter 0.4 --color-jitter-prob 1.5", "--color-jitter-prob must be a probability"},
           {"--aa 3a-m9", "--aa 3a-m9: 3-Augment takes one option, mstd"},
           {"--reprob 0.5 --remode zero", "--remode: expected pixel, rand or const, got 'zero'"},
           {"--reprob 0.5 --recount 0", "--recount must be 1 to 1000 boxes, got 0"},
           {"--img-size 8 --gaussian-blur-prob 0.5", "needs images over 11 pixels a side, not 8 x 8"}}) {
    const Result bad = run(base + flags);
    EXPECT_NE(bad.code, 0) << flags;
    EXPECT_NE(bad.out.find(error), std::string::npos) << flags << ": " << bad.out;
  }
}

// --opt lamb (timm's Lamb, with its eps of 1e-6) trains other weights than adamw, the same on
// 1 and 2 threads with fixed shards, and resumes from its state (the same moments as Adam's) to
// the straight run's bits.
TEST(Cli, LambTrainsAndResumesExactly) {
  vit::test::TempDir tmp("lamb");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 -b 16 --log-every 0 --sched none "
      "--weight-decay 0.05 --shards 2 ";
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  Result lamb = run(base + "--opt lamb --threads 1 --output " + (tmp / "lamb"));
  ASSERT_EQ(lamb.code, 0) << lamb.out;
  EXPECT_TRUE(lamb.out.find(", lamb lr 0.005") != std::string::npos) << lamb.out;
  ASSERT_EQ(run(base + "--opt lamb --threads 2 --output " + (tmp / "two")).code, 0);
  EXPECT_TRUE(bytes(tmp / "lamb") == bytes(tmp / "two")) << "1 and 2 threads differ";
  ASSERT_EQ(run(base + "--opt lamb --opt-eps 1e-6 --threads 1 --output " + (tmp / "eps")).code, 0);
  EXPECT_TRUE(bytes(tmp / "lamb") == bytes(tmp / "eps")) << "Lamb's eps is not timm's 1e-6";
  ASSERT_EQ(run(base + "--opt adamw --threads 1 --output " + (tmp / "adamw")).code, 0);
  EXPECT_NE(bytes(tmp / "lamb"), bytes(tmp / "adamw"));
  const std::string resumed = tmp / "resumed";
  ASSERT_EQ(run(base + "--opt lamb --threads 1 --epochs 1 --output " + resumed).code, 0);
  Result again = run("train --resume " + resumed + " --epochs 2");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(bytes(resumed) == bytes(tmp / "lamb")) << "the resumed run differs";
}

// timm's --opt lion (betas 0.9 0.99 unless given) and lambc train other weights than adamw
// and lamb, the same on 1 and 2 threads, and resume exactly (Lion's state: exp_avg alone).
TEST(Cli, LionAndLambcTrainAndResumeExactly) {
  vit::test::TempDir tmp("lion");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 -b 16 --log-every 0 --sched none "
      "--weight-decay 0.05 --shards 2 --threads 1 ";
  auto bytes = [&](const std::string& run_dir) { return vit::read_text_file(run_dir + "/last.safetensors"); };
  each_trains_other_weights(tmp, base,
                            {{"adamw", "--opt adamw"},
                             {"lamb", "--opt lamb"},
                             {"lambc", "--opt lambc --lr 0.05"},
                             {"lion", "--opt lion --lr 5e-4"},
                             {"lion_b", "--opt lion --lr 5e-4 --opt-betas 0.9 0.999"}});
  ASSERT_EQ(run(base + "--opt lion --lr 5e-4 --opt-betas 0.9 0.99 --output " + (tmp / "betas")).code, 0);
  EXPECT_TRUE(bytes(tmp / "lion") == bytes(tmp / "betas")) << "Lion's betas are not timm's 0.9 0.99";
  ASSERT_EQ(run(base + "--opt lion --lr 5e-4 --output " + (tmp / "two") + " --threads 2").code, 0);
  EXPECT_TRUE(bytes(tmp / "lion") == bytes(tmp / "two")) << "1 and 2 threads differ";
  for (const std::string opt : {"lion --lr 5e-4", "lambc --lr 0.05"}) {
    const std::string straight = tmp / (opt.substr(0, opt.find(' '))), resumed = tmp / "resumed";
    std::filesystem::remove_all(resumed);
    ASSERT_EQ(run(base + "--opt " + opt + " --epochs 1 --output " + resumed).code, 0);
    const Result again = run("train --resume " + resumed + " --epochs 2");
    ASSERT_EQ(again.code, 0) << again.out;
    EXPECT_TRUE(bytes(resumed) == bytes(straight)) << opt << ": the resumed run differs";
  }
  const auto state = vit::SafeTensors::open(tmp / "lion/last.state.safetensors");
  bool avg = false, avg_sq = false;
  for (const vit::TensorInfo& t : state.tensors()) {
    avg = avg || t.name.rfind("exp_avg.", 0) == 0;
    avg_sq = avg_sq || t.name.rfind("exp_avg_sq.", 0) == 0;
  }
  EXPECT_TRUE(avg && !avg_sq) << "Lion keeps one moment";
}

// timm's --head-init-scale and --head-init-bias set the head as training starts (an lr of
// 1e-30 leaves every weight where it began); a resume keeps the trained head.
TEST(Cli, HeadInitScaleAndBiasSetTheHeadAsTrainingStarts) {
  vit::test::TempDir tmp("headinit");
  const std::string base =
      "train --model mnist-seed --synthetic 32 --epochs 1 -b 16 --threads 1 --sched none --lr 1e-30 "
      "--log-every 0 ";
  ASSERT_EQ(run(base + "--output " + (tmp / "plain")).code, 0);
  Result r = run(base + "--head-init-scale 0.5 --head-init-bias -2 --output " + (tmp / "head"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto plain = vit::SafeTensors::open(tmp / "plain/last.safetensors");
  const auto head = vit::SafeTensors::open(tmp / "head/last.safetensors");
  const auto w0 = plain.to_float("head.weight"), w = head.to_float("head.weight");
  ASSERT_EQ(w.size(), w0.size());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], 0.5f * w0[i]) << i;
  for (float b : head.to_float("head.bias")) ASSERT_EQ(b, -2.f);
  EXPECT_TRUE(plain.to_float("blocks.0.mlp.fc1.weight") == head.to_float("blocks.0.mlp.fc1.weight"));
  // The resume's second epoch starts from the state's head: not scaled again.
  Result again = run("train --resume " + (tmp / "head") + " --epochs 2");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(vit::SafeTensors::open(tmp / "head/last.safetensors").to_float("head.weight") == w);
}

// timm's --lr-base: the lr from a base lr scaled to the global batch (sqrt for the Adam
// family, linear for SGD, or as --lr-base-scale says), said in a line, where no --lr is given
// (a recipe's --lr gives way to it; a typed one wins, as timm's); args.json keeps the flag that
// set it, so a resume takes the same lr.
TEST(Cli, LrBaseScalesTheLrToTheGlobalBatch) {
  vit::test::TempDir tmp("lrbase");
  const std::string base = "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 --threads 1 ";
  const std::pair<std::string, std::string> cases[] = {
      {"-b 32 --lr-base 0.1", "lr 0.0353553 from --lr-base 0.1 x sqrt(batch 32 / 256), timm's sqrt scaling"},
      {"-b 32 --lr-base 0.1 --opt sgd",
       "lr 0.0125 from --lr-base 0.1 x (batch 32 / 256), timm's linear scaling"},
      {"-b 16 --grad-accum-steps 4 --lr-base 0.2 --lr-base-size 128 --lr-base-scale linear",
       "lr 0.1 from --lr-base 0.2 x (batch 64 / 128), timm's linear scaling"},
      {"--recipe mnist-seed -b 64 --lr-base 0.01 --lr-base-scale sqrt",
       "lr 0.005 from --lr-base 0.01 x sqrt(batch 64 / 256), timm's sqrt scaling"},
  };
  for (const auto& [flags, line] : cases) {
    Result r = run(base + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.out;
    EXPECT_TRUE(r.out.find(line) != std::string::npos) << flags << ": no '" << line << "' in\n" << r.out;
  }
  // The recipe's --lr 0.005 leaves args.json; the resume says the same line.
  const std::string dir = tmp / "run";
  ASSERT_EQ(run(base + "--recipe mnist-seed -b 32 --lr-base 0.1 --output " + dir).code, 0);
  const auto args = nlohmann::json::parse(vit::read_text_file(dir + "/args.json"));
  EXPECT_FALSE(args.contains("lr")) << args.dump();
  EXPECT_EQ(args.value("lr-base", 0.0), 0.1) << args.dump();
  Result again = run("train --resume " + dir + " --epochs 2");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(again.out.find("adam lr 0.0353553") != std::string::npos) << again.out;
  // A typed --lr, before or after --lr-base, sets the lr; args.json keeps it alone.
  for (const std::string flags : {"--lr-base 0.1 --lr 0.02", "--recipe mnist-seed --lr 0.02 --lr-base 0.1"}) {
    fs::remove_all(tmp / "lr");
    Result lr = run(base + flags + " --output " + (tmp / "lr"));
    ASSERT_EQ(lr.code, 0) << lr.out;
    EXPECT_TRUE(lr.out.find(" lr 0.02") != std::string::npos) << flags << ": " << lr.out;
    const auto lr_args = nlohmann::json::parse(vit::read_text_file(tmp / "lr/args.json"));
    EXPECT_FALSE(lr_args.contains("lr-base")) << lr_args.dump();
    EXPECT_EQ(lr_args.value("lr", 0.0), 0.02) << lr_args.dump();
  }
  EXPECT_NE(run(base + "--lr-base 0").code, 0);
  EXPECT_NE(run(base + "--lr-base 0.1 --lr-base-scale cube").code, 0);
}

// --grad-accum-steps N: global batches of -b x N, steps counted as optimizer steps; the run
// resumes with it (args.json) and the log says so.
TEST(Cli, GradAccumStepsMakeAGlobalBatchOfMicroBatches) {
  vit::test::TempDir tmp("accum");
  const std::string dir = tmp / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 8 --grad-accum-steps 2 "
          "--threads 1 --log-every 1 --output " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 epoch of 4 steps, batch 16 (8 x 2 accumulation steps)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("epoch 1/1 step 4/4 loss"), std::string::npos) << r.out;
  Result longer = run("train --resume " + dir + " --epochs 2");
  EXPECT_EQ(longer.code, 0) << longer.out;
  EXPECT_NE(longer.out.find("batch 16 (8 x 2 accumulation steps)"), std::string::npos) << longer.out;
  Result bad = run("train --model mnist-seed --synthetic 64 --grad-accum-steps 0");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--grad-accum-steps must be positive"), std::string::npos) << bad.out;
}

// --model-ema: the EMA is evaluated each epoch (summary.csv's ema_* columns, the log) and
// saved beside the model as last_ema.safetensors and best_ema.safetensors (checkpoints as
// any other).
TEST(Cli, ModelEmaIsEvaluatedAndSavedBesideTheModel) {
  vit::test::TempDir tmp("ema");
  const std::string dir = tmp / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 -b 16 --threads 1 --log-every 0 "
          "--model-ema --model-ema-decay 0.5 --output " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(", EMA eval loss "), std::string::npos) << r.out;
  const std::string csv = vit::read_text_file(dir + "/summary.csv");
  EXPECT_EQ(csv.rfind("epoch,train_loss,train_top1,eval_loss,eval_top1,eval_top5,ema_eval_loss,ema_eval_top1,"
                      "ema_eval_top5,lr,seconds\n",
                      0),
            0u)
      << csv;
  for (const char* f : {"last_ema.safetensors", "best_ema.safetensors"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  EXPECT_NE(vit::read_text_file(dir + "/last_ema.safetensors"),
            vit::read_text_file(dir + "/last.safetensors"));
  Result info = run("info --checkpoint " + dir + "/best_ema.safetensors");
  EXPECT_EQ(info.code, 0) << info.out;
}

// --amp trains in mixed precision, says so, and keeps it in args.json for a resume; only
// bfloat16 is offered as --amp-dtype.
TEST(Cli, AmpTrainingRunsSaysSoAndResumesWithIt) {
  if (!vit::ops::bf16_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  vit::test::TempDir tmp("amp");
  const std::string dir = tmp / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 64 --epochs 1 -b 16 --threads 2 --amp "
          "--log-every 0 --output " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("mixed precision (--amp)"), std::string::npos) << r.out;
  Result again = run("train --resume " + dir);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("mixed precision (--amp)"), std::string::npos) << again.out;
  Result fp16 = run("train --model mnist-seed --synthetic 64 --epochs 1 --amp --amp-dtype float16");
  EXPECT_NE(fp16.code, 0);
  EXPECT_NE(fp16.out.find("--amp-dtype"), std::string::npos) << fp16.out;
}

// vit-pytorch's variants from flags: a run writes them into config.json and args.json, resumes
// with them, and its checkpoint loads with them.
TEST(Cli, VitPytorchVariantFlagsTrainAndResume) {
  vit::test::TempDir tmp("vitpt");
  const std::string dir = tmp / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 32 --epochs 1 -b 16 --threads 1 --log-every 0 "
          "--dim-head 6 --patch-norm --pool avg --no-class-token --output " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto cfg = nlohmann::json::parse(vit::read_text_file(tmp / "run/config.json"));
  EXPECT_EQ(cfg["dim_head"], 6) << cfg.dump();
  EXPECT_EQ(cfg["patch_norm"], true) << cfg.dump();
  EXPECT_EQ(cfg["class_token"], false) << cfg.dump();
  Result again = run("train --resume " + dir + " --epochs 2 --log-every 0");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(vit::read_text_file(tmp / "run/config.json")), cfg);
  Result info = run("info --checkpoint " + dir);
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("\"patch_norm\": true"), std::string::npos) << info.out;
  Result incl = run("train --model mnist-seed --synthetic 8 --epochs 1 --pool-include-prefix");
  EXPECT_NE(incl.code, 0);
  EXPECT_NE(incl.out.find("pool_include_prefix is for global_pool 'avg' or 'map'"), std::string::npos)
      << incl.out;
}

// --act-layer (timm's act_layer): the config keeps it, a resume reads it back, and a
// pretrained model's own cannot be changed by it.
TEST(Cli, ActLayerTrainsAndResumes) {
  vit::test::TempDir tmp("act");
  const std::string dir = tmp / "run";
  Result r =
      run("train --model mnist-seed --img-size 16 --synthetic 32 --epochs 1 -b 16 --threads 1 --log-every 0 "
          "--act-layer quick_gelu --output " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto cfg = nlohmann::json::parse(vit::read_text_file(tmp / "run/config.json"));
  EXPECT_EQ(cfg["act_layer"], "quick_gelu") << cfg.dump();
  Result again = run("train --resume " + dir + " --epochs 2 --log-every 0");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(vit::read_text_file(tmp / "run/config.json")), cfg);
  Result bad = run("train --model mnist-seed --synthetic 8 --epochs 1 --act-layer relu");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--act-layer"), std::string::npos) << bad.out;
  Result ft = run("train --pretrained " + dir + " --synthetic 8 --epochs 1 --act-layer gelu");
  EXPECT_NE(ft.code, 0);
  EXPECT_NE(ft.out.find("--act-layer"), std::string::npos) << ft.out;
}

TEST(Cli, MeanAndStdOverrideTheModelsNormalization) {
  vit::test::TempDir tmp("norm");
  const std::string base =
      "train --model mnist-seed --img-size 16 --synthetic 32 --epochs 1 -b 16 --threads 1 ";
  Result r = run(base + "--mean 0.286 --std 0.353 --output " + (tmp / "run"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto cfg = nlohmann::json::parse(vit::read_text_file(tmp / "run/config.json"));
  EXPECT_EQ(cfg["mean"], nlohmann::json::array({0.286})) << cfg.dump();
  EXPECT_EQ(cfg["std"], nlohmann::json::array({0.353})) << cfg.dump();
  r = run(base + "--mean 0.4 0.5");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--mean takes 1 value (the model has one input channel), got 2"), std::string::npos)
      << r.out;
  r = run(base + "--std 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--std must be positive"), std::string::npos) << r.out;
}

// vit runs itself again to set OpenMP's wait policy. Under OMP_PROC_BIND libgomp has bound
// the first run's thread to one CPU by then, and the second run used to inherit that mask
// and see one CPU: every thread on it, half the speed on two cores. It must see what this
// process sees (`cpus` in bench's JSON is omp_get_num_procs(), taken before vit binds).
// vit binds its threads itself (threads_bound) only when they are two, one per CPU, and neither
// OMP_PROC_BIND, OMP_PLACES nor VIT_BIND=off says otherwise, and not for training.
TEST(Cli, ThreadBindingKeepsEveryCpu) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  const int cpus = CPU_COUNT(&mine);
  if (cpus < 2) GTEST_SKIP() << "one CPU here: nothing to lose";
  const std::string bench =
      "bench --model mnist-seed -b 2 --threads 2 --warmup 0 --runs 1 --min-time 0 --ceiling 100 --json";
  for (const char* env : {"", "OMP_PROC_BIND=true", "OMP_PROC_BIND=close OMP_PLACES=cores", "VIT_BIND=off"}) {
    Result r = vit::test::run_vit(bench, env);
    ASSERT_EQ(r.code, 0) << env << ": " << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["cpus"], cpus) << "with " << (*env ? env : "no binding");
    EXPECT_EQ(j["threads_bound"], !*env && cpus == 2) << "with " << (*env ? env : "nothing set");
  }
  Result r = vit::test::run_vit(
      "bench --model mnist-seed -b 2 --threads 1 --warmup 0 --runs 1 --min-time 0 --ceiling 100 --json", "");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["threads_bound"], false) << "one thread of " << cpus << " CPUs";
  for (const char* env : {"", "VIT_BIND=on"}) {  // as vit train: free for its data loader, unless asked
    r = vit::test::run_vit(bench + " --mode train", env);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["threads_bound"], *env && cpus == 2) << "training step, " << env;
  }
}

// A --min-time given is kept: runs stopped at 1000 whatever it said (mnist-seed's 1000 runs
// took 0.11 s of --min-time 5). The timed runs add up to it, however fast the machine.
TEST(Cli, BenchKeepsAMinTimeGiven) {
  Result r =
      run("bench --model mnist-seed --threads 1 --warmup 0 --runs 1 --min-time 0.3 --ceiling 100 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(vit::test::last_line(r.out));
  EXPECT_GE(j["timed_ms"].get<double>(), 300.0) << r.out;
  EXPECT_GE(j["timed_ms"].get<double>(), j["runs"].get<double>() * j["min_ms"].get<double>()) << r.out;
}

TEST(Cli, BenchJsonReportsTimesRatesAndMemory) {
  Result r =
      run("bench --model mnist-seed --mode train -b 8 --threads 1 --warmup 1 --runs 3 --min-time 0 "
          "--ceiling 100 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs"], 3);
  EXPECT_EQ(j["ceiling_source"], "given");
  const double med = j["median_ms"], lo = j["min_ms"], hi = j["max_ms"];
  EXPECT_GT(lo, 0.0);
  EXPECT_LE(lo, med);
  EXPECT_LE(med, hi);
  // images/s and GFLOP/s follow from the median and the model's FLOPs (3x forward to train).
  EXPECT_NEAR(double(j["images_per_s"]), 8.0 / (med / 1e3), 1e-6 * double(j["images_per_s"]));
  EXPECT_NEAR(double(j["gflops_per_s"]), double(j["images_per_s"]) * double(j["gflop_per_image"]), 1e-6);
  EXPECT_NEAR(double(j["pct_of_ceiling"]), double(j["gflops_per_s"]), 1e-6);  // ceiling 100
  EXPECT_GT(double(j["peak_rss_mb"]), 1.0);
  Result text =
      run("bench --model mnist-seed -b 2 --threads 1 --warmup 0 --runs 1 --min-time 0 --ceiling 100");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("images/s"), std::string::npos) << text.out;
  Result bf16 =
      run("bench --model mnist-seed -b 2 --threads 1 --warmup 0 --runs 1 --min-time 0 --ceiling 100 "
          "--dtype bf16 --json");
  if (vit::ops::bf16_available()) {
    ASSERT_EQ(bf16.code, 0) << bf16.out;
    EXPECT_EQ(nlohmann::json::parse(vit::test::last_line(bf16.out)).at("dtype"), "bf16") << bf16.out;
  } else {
    EXPECT_NE(bf16.code, 0);
    EXPECT_NE(bf16.out.find("--dtype bf16: " + vit::ops::bf16_missing()), std::string::npos) << bf16.out;
  }
  // int8 names the product it ran (vit info says what it gains).
  Result int8 = run(
      "bench --model mnist-seed -b 2 --threads 1 --warmup 0 --runs 1 --min-time 0 --ceiling 100 --dtype int8 "
      "--json");
  ASSERT_EQ(int8.code, 0) << int8.out;
  EXPECT_EQ(nlohmann::json::parse(int8.out)["int8_product"], vit::ops::cpu_int8_product());
  // With AMX, layers narrower than its tiles run the table's product, said beside it.
  EXPECT_EQ(nlohmann::json::parse(int8.out)["int8_narrow_product"], vit::ops::cpu_int8_table_product());
  // Training in bf16 is mixed precision (vit train --amp).
  Result train_bf16 = run(
      "bench --model mnist-seed --mode train -b 4 --threads 1 --dtype bf16 --warmup 0 --runs 1 --min-time 0 "
      "--ceiling 100 --json");
  if (vit::ops::bf16_available()) {
    ASSERT_EQ(train_bf16.code, 0) << train_bf16.out;
    EXPECT_EQ(nlohmann::json::parse(vit::test::last_line(train_bf16.out)).at("dtype"), "bf16")
        << train_bf16.out;
  } else {
    EXPECT_NE(train_bf16.code, 0);
    EXPECT_NE(train_bf16.out.find("--dtype bf16: " + vit::ops::bf16_missing()), std::string::npos)
        << train_bf16.out;
  }
}

// vit info says which kernels this CPU runs: the path, and whether bf16 and int8 pay here.
TEST(Cli, InfoSaysWhatTheCpuRuns) {
  Result r = run("info");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(std::string("isa: ") + vit::ops::cpu_isa()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(vit::ops::bf16_available() ? "bf16 products: oneDNN's"
                                                  : "bf16 products: none: " + vit::ops::bf16_missing()),
            std::string::npos)
      << r.out;
  // The plain AVX2 and NEON products are the ones without four-byte sums (GemmS8.EveryPathsTableHasOne).
  const std::string product = vit::ops::cpu_int8_product();
  const bool plain = product == "avx2" || product == "neon";
  EXPECT_EQ(vit::ops::cpu_int8_has_dot_product(), !plain && product != "generic") << product;
  EXPECT_NE(r.out.find("int8 products: " + product + " ("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("saves 3/4") != std::string::npos, plain) << r.out;
  const bool amx = product == "amx";
  EXPECT_EQ(r.out.find("four byte products") != std::string::npos, !plain && !amx && product != "generic")
      << r.out;
  EXPECT_EQ(r.out.find("oneDNN on AMX tiles") != std::string::npos, amx) << r.out;
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroExit) {
  Result r = run("train --synthetic 10 --img-size 3 --patch-size 4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("is smaller than one patch"), std::string::npos) << r.out;
  r = run("train --synthetic 10 --embed-dim 10 --num-heads 3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("does not divide embed_dim"), std::string::npos) << r.out;
  r = run("train --synthetic 10 -b 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--batch-size must be positive"), std::string::npos) << r.out;
  r = run("train --synthetic 10 --lr -1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--lr (the learning rate) must be a positive number"), std::string::npos) << r.out;
  r = run("train --model nope --synthetic 10");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("unknown model preset 'nope'"), std::string::npos) << r.out;
  // One of timm's architectures vitcpp does not build: why, as its checkpoint is refused.
  EXPECT_EQ(run("info --model vit_tiny_patch16_224.augreg_in21k").code, 0);  // timm's pretrained tag
  // timm's deprecated names build their name.tag with timm's warning (it was silent here).
  r = run("info --model vit_tiny_patch16_224_in21k");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vit: note: --model vit_tiny_patch16_224_in21k: timm's deprecated name of "
                       "vit_tiny_patch16_224.augreg_in21k, built as that"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"num_classes\": 21843"), std::string::npos) << r.out;
  r = run("info --model vit_giant_patch14_dinov2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(
      r.out.find("timm's vit_giant_patch14_dinov2 has a gated MLP (GluMlp, SiLU): vitcpp does not build it"),
      std::string::npos)
      << r.out;
  r = run("info --checkpoint /nonexistent.safetensors");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.safetensors"), std::string::npos) << r.out;
  r = run("eval --checkpoint /nonexistent.safetensors --data-dir /");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.safetensors"), std::string::npos) << r.out;
}

namespace {
// A small CIFAR-10 binary dataset: 5 x 13 training and 16 test images of patterned pixels.
void write_cifar(const vit::test::TempDir& data) {
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
}
}  // namespace

// vit samples with vit train's augmentation flags draws what a training epoch sees: a flip
// of 1 mirrors every image exactly (the normalization's round trip loses nothing), and a
// random crop is the same for one epoch and seed and changes with the epoch.
TEST(Cli, SamplesShowTheAugmentationAnEpochSees) {
  vit::test::TempDir data("samples_data"), out("samples_out");
  write_cifar(data);
  const std::string base = "samples --data-dir " + data.str() + " -n 3 --out " + out.str();
  ASSERT_EQ(run(base + "/plain").code, 0);
  Result flip = run(base + "/flip --hflip 1");
  ASSERT_EQ(flip.code, 0) << flip.out;
  for (int i = 0; i < 3; ++i) {
    const std::string name =
        std::vector<std::string>{"/0_airplane.png", "/1_automobile.png", "/2_bird.png"}[size_t(i)];
    const vit::Image a = vit::read_image(out / ("plain" + name)), b = vit::read_image(out / ("flip" + name));
    ASSERT_EQ(a.h, 32);
    int64_t bad = 0;
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < 32; ++x)
        for (int64_t c = 0; c < 3; ++c) bad += a.px[(y * 32 + x) * 3 + c] != b.px[(y * 32 + 31 - x) * 3 + c];
    EXPECT_EQ(bad, 0) << name;
  }
  const std::string crop = " --scale 0.2 1 --color-jitter 0.4";
  ASSERT_EQ(run(base + "/e1" + crop).code, 0);
  ASSERT_EQ(run(base + "/e1again" + crop).code, 0);
  ASSERT_EQ(run(base + "/e2" + crop + " --epoch 2").code, 0);
  const std::string first = "/0_airplane.png";
  EXPECT_EQ(vit::read_image(out / ("e1" + first)).px, vit::read_image(out / ("e1again" + first)).px);
  EXPECT_NE(vit::read_image(out / ("e1" + first)).px, vit::read_image(out / ("e2" + first)).px);
  EXPECT_NE(vit::read_image(out / ("e1" + first)).px, vit::read_image(out / ("plain" + first)).px);
}

// vit samples on image folders: the images at the input size training resizes them to
// (--img-size H W, default 224), named by their class folders, in the split asked for; a
// flip of 1 mirrors them exactly; --img-size on CIFAR files is an error.
TEST(Cli, SamplesOfImageFoldersAtTheInputSize) {
  vit::test::TempDir data("samples_folder"), out("samples_folder_out");
  for (const char* split : {"train", "val"})
    for (const char* cls : {"cat", "dog"}) {
      std::filesystem::create_directories(data / (std::string(split) + "/" + cls));
      vit::Image img{30, 50, 3, std::vector<uint8_t>(30 * 50 * 3)};
      for (size_t i = 0; i < img.px.size(); ++i) img.px[i] = uint8_t(i * 7 + (cls[0] == 'd') * 90);
      vit::write_png(data / (std::string(split) + "/" + cls + "/a.png"), img);
    }
  const std::string base = "samples --data-dir " + data.str() + " -n 2 --out " + out.str();
  Result plain = run(base + "/plain --img-size 24 40");
  ASSERT_EQ(plain.code, 0) << plain.out;
  const vit::Image a = vit::read_image(out / "plain/1_dog.png");
  EXPECT_EQ(a.h, 24);
  EXPECT_EQ(a.w, 40);
  ASSERT_EQ(run(base + "/default --split train").code, 0);
  EXPECT_EQ(vit::read_image(out / "default/0_cat.png").w, 224);
  ASSERT_EQ(run(base + "/flip --img-size 24 40 --hflip 1").code, 0);
  const vit::Image b = vit::read_image(out / "flip/1_dog.png");
  int64_t bad = 0;
  for (int64_t y = 0; y < 24; ++y)
    for (int64_t x = 0; x < 40; ++x)
      for (int64_t c = 0; c < 3; ++c) bad += a.px[(y * 40 + x) * 3 + c] != b.px[(y * 40 + 39 - x) * 3 + c];
  EXPECT_EQ(bad, 0);
  vit::test::TempDir cifar("samples_cifar");
  write_cifar(cifar);
  Result r = run("samples --data-dir " + cifar.str() + " --img-size 64 --out " + out.str() + "/c");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--img-size is for image folders"), std::string::npos) << r.out;
}

TEST(Cli, CifarSeedRecipeRunsEndToEndOnCifarFormatFiles) {
  // Seed 002's recipe (cifar-seed model, Adam, crop + flip, early stopping) on a small
  // CIFAR-10 binary dataset written here: 65 training and 16 test images.
  vit::test::TempDir data("cifar_data"), out("cifar_run");
  write_cifar(data);
  Result r =
      run("train --recipe cifar-seed --data-dir " + data.str() + " --epochs 2 -b 32 --output " + out.str());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("65 images"), std::string::npos) << r.out;
  const std::string summary = vit::read_text_file(out / "summary.csv");
  EXPECT_NE(summary.find("\n2,"), std::string::npos) << summary;
  const std::string args = vit::read_text_file(out / "args.json");
  EXPECT_NE(args.find("\"crop-pad\": 4,"), std::string::npos) << "the recipe's flags are recorded: " << args;
  const std::string png = out / "confusion.png";
  Result ev = run("eval --json --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() +
                  " --confusion-png " + png);
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_GT(vit::read_image(png).w, 0) << "the confusion matrix as a PNG";
  Result bad = run("eval --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() +
                   " --confusion-png " + png + " --labels /nonexistent.txt");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("/nonexistent.txt: cannot open the labels file"), std::string::npos) << bad.out;
  EXPECT_NE(ev.out.find("\"count\":16"), std::string::npos) << ev.out;
  EXPECT_NE(ev.out.find("\"confusion\":[["), std::string::npos) << ev.out;
  // Before the JSON, the one note on stderr: the made-up batches are shorter than CIFAR's.
  const size_t json_at = ev.out.find('{');
  EXPECT_EQ(ev.out.substr(0, json_at),
            "note: fewer records than the CIFAR archive's batches (a copy cut short?): test_batch.bin 16 of "
            "10000\n");
  EXPECT_EQ(nlohmann::json::parse(ev.out.substr(json_at))["confusion_png"], png)
      << "--json names the picture it wrote";
  // Progress on stderr: nothing by default where stderr is not a terminal (as here: the note
  // alone came before the JSON); --progress bar draws the bar, ending at the total, before the JSON;
  // --progress log with a tiny interval writes lines; --progress none nothing.
  const std::string ck =
      " --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() + " -b 4";
  Result bar = run("eval --json --progress bar" + ck);
  ASSERT_EQ(bar.code, 0) << bar.out;
  EXPECT_NE(bar.out.find("\r\033[2Keval [========================] 16/16 images top1 "), std::string::npos)
      << bar.out;
  EXPECT_EQ(nlohmann::json::parse(bar.out.substr(bar.out.find('{')))["count"], 16) << bar.out;
  Result lines = run("eval --progress log --log-seconds 0.000001" + ck);
  ASSERT_EQ(lines.code, 0) << lines.out;
  EXPECT_EQ(lines.out.find("\033[2K"), std::string::npos) << lines.out;
  EXPECT_NE(lines.out.find("\neval 16/16 images top1 "), std::string::npos) << lines.out;
  Result plain = run("eval" + ck), none = run("eval --progress none" + ck);
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_EQ(none.out, plain.out);
  EXPECT_EQ(plain.out.find(" images top1 "), std::string::npos) << plain.out;
  EXPECT_NE(run("eval --progress sometimes" + ck).code, 0);
  // timm's validate.py results (accuracies in percent) and, without --json, where files went.
  const std::string res = out / "results.json";
  Result txt = run("eval --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() +
                   " --results-file " + res + " --confusion-png " + png);
  ASSERT_EQ(txt.code, 0) << txt.out;
  EXPECT_NE(txt.out.find("wrote " + png + " (confusion_png)"), std::string::npos) << txt.out;
  EXPECT_NE(txt.out.find("wrote " + res + " (results_file)"), std::string::npos) << txt.out;
  const auto rj = nlohmann::json::parse(vit::read_text_file(res));
  for (const char* k : {"model", "top1", "top1_err", "top5", "top5_err", "param_count", "img_size",
                        "crop_pct", "interpolation"})
    EXPECT_TRUE(rj.contains(k)) << k << " in " << rj.dump();
  EXPECT_NEAR(double(rj["top1"]) + double(rj["top1_err"]), 100.0, 1e-3);
  EXPECT_NEAR(double(rj["top1"]), double(nlohmann::json::parse(ev.out.substr(json_at))["top1"]), 1e-3);
  EXPECT_EQ(rj["img_size"], 32);
  EXPECT_EQ(vit::read_text_file(res).find("\"model\""), 6u) << "timm's order: model first";
  // A .csv name (or --results-format csv) gets timm's CSV: the header, then the row.
  for (const std::string& how : {std::string(" --results-file ") + (out / "results.csv"),
                                 std::string(" --results-format csv --results-file ") + (out / "r.txt")}) {
    ASSERT_EQ(run("eval --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() + how).code,
              0);
    const std::string text =
        vit::read_text_file(how.find(".csv") != std::string::npos ? out / "results.csv" : out / "r.txt");
    EXPECT_EQ(
        text.rfind("model,top1,top1_err,top5,top5_err,param_count,img_size,crop_pct,interpolation\n", 0), 0u)
        << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  }
  // --predictions: one row per test image whose matches give the reported top-1; the same
  // with bf16 products (where the CPU has them).
  for (const char* dtype : {"fp32", "bf16"}) {
    if (std::string(dtype) == "bf16" && !vit::ops::bf16_available()) continue;
    const std::string csv = out / (std::string(dtype) + ".csv");
    Result p = run("eval --json --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() +
                   " --dtype " + dtype + " --predictions " + csv);
    ASSERT_EQ(p.code, 0) << p.out;
    std::ifstream in(csv);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "index,label,prediction,label_name,prediction_name");  // CIFAR-10's names
    int rows = 0, right = 0;
    for (int index, label, pred; std::getline(in, line); ++rows) {
      ASSERT_EQ(std::sscanf(line.c_str(), "%d,%d,%d", &index, &label, &pred), 3) << line;
      EXPECT_EQ(index, rows);
      right += label == pred;
    }
    EXPECT_EQ(rows, 16);
    // percent; the last line: emulated bf16 warns on stderr first
    EXPECT_DOUBLE_EQ(double(nlohmann::json::parse(vit::test::last_line(p.out))["top1"]), 100.0 * right / 16.0)
        << dtype;
  }
  // The test split alone evaluates to the same result: eval reads only the split it uses.
  for (int k = 1; k <= 5; ++k) std::filesystem::remove(data / ("data_batch_" + std::to_string(k) + ".bin"));
  Result alone = run("eval --json --checkpoint " + (out / "best.safetensors") + " --data-dir " + data.str() +
                     " --confusion-png " + png);
  ASSERT_EQ(alone.code, 0) << alone.out;
  EXPECT_EQ(alone.out, ev.out);
  Result train_split = run("eval --split train" + ck);
  EXPECT_NE(train_split.code, 0);
  EXPECT_NE(train_split.out.find(data.str() + ": no CIFAR-10 training batches"), std::string::npos)
      << train_split.out;
}

TEST(Cli, FineTuneAHuggingFaceModelExportedToTimmWithAFrozenBackbone) {
  vit::test::TempDir tmp("ft");
  const std::string hf = std::string(VIT_FIXTURE_DIR) + "/pretrained/hf";
  Result r = run("export --checkpoint " + hf + " --out " + (tmp / "timm"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("eps"), std::string::npos) << "HF's eps 1e-12 is worth a note: " << r.out;
  r = run("train --recipe finetune --pretrained " + (tmp / "timm") +
          " --num-classes 4 --img-size 40 --freeze-backbone --synthetic 64 --epochs 2 -b 32 --threads 1 "
          "--output " +
          (tmp / "run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("pos_embed resampled from a 4x4 grid to 5x5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("new head: 4 classes"), std::string::npos) << r.out;
  // A fixed table is computed for the new grid, not resampled, and the note says so.
  r = run(
      "train --model mnist-seed --pos-embed sincos2d --synthetic 16 --epochs 1 -b 8 --threads 1 --output " +
      (tmp / "fixed"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train --pretrained " + (tmp / "fixed") +
          " --img-size 32 --synthetic 16 --epochs 1 -b 8 --threads 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("pos_embed: the fixed sincos2d table computed anew from a 7x7 grid to 8x8"),
            std::string::npos)
      << r.out;
  const vit::SafeTensors before = vit::SafeTensors::open(hf + "/model.safetensors");
  const vit::SafeTensors after = vit::SafeTensors::open(tmp / "run/last.safetensors");
  EXPECT_EQ(after.to_float("blocks.1.attn.qkv.weight").size(), 3u * 32 * 32);
  EXPECT_EQ(after.to_float("blocks.0.mlp.fc1.weight"),
            before.to_float("vit.encoder.layer.0.intermediate.dense.weight"));
  EXPECT_EQ(after.to_float("norm.weight"), before.to_float("vit.layernorm.weight"));
  bool head_moved = false;
  for (float v : after.to_float("head.weight")) head_moved |= v != 0.f;
  EXPECT_TRUE(head_moved);
  // The fine-tuned run predicts at its new size, with any layout's flags.
  r = run("predict --checkpoint " + (tmp / "run/last.safetensors") + " --json --topk 2 " +
          std::string(VIT_FIXTURE_DIR) + "/pretrained/images/cat.jpg");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"topk\""), std::string::npos) << r.out;
  r = run("train --pretrained " + hf + " --embed-dim 64 --synthetic 8 --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--embed-dim cannot change the architecture"), std::string::npos) << r.out;
  // --model names the model the file is (timm's --model beside a checkpoint): another is
  // refused, saying how they differ (it was ignored, and args.json named it); a recipe's
  // --model makes way.
  r = run("train --pretrained " + hf + " --model vit-base-16 --synthetic 8 --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(" is not a vit-base-16: it holds a ViT of embed_dim 32"), std::string::npos) << r.out;
  r = run("train --recipe mnist --pretrained " + hf +
          " --num-classes 10 --synthetic 8 --epochs 1 -b 8 --output " + (tmp / "recipe"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(nlohmann::json::parse(vit::read_text_file(tmp / "recipe/args.json")).contains("model"));
}
