// Data-parallel training under mpirun (label `mpi`): the same seed and global batch give
// the same weights with 2 processes as with one, `--resume` continues across a change of
// the process count, and a rank that fails, disagrees or hangs ends the job with a message
// instead of a hang. Skipped when the build has no MPI.
//
// Tolerances. One process under mpirun computes exactly what a plain run computes
// (bit-identical). Two processes split each batch's rows, so every gradient is summed in
// another order (each rank's partial sum, then the all-reduce) and the matrix products run
// on half the rows: float rounding differs at ~1e-7 relative per step and AdamW carries it
// on. After 8 steps the weights agree to 2e-4 x the largest weight of each tensor. Two runs
// with 2 processes are bit-identical (the all-reduce's order is fixed for a given count).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file.h"
#include "io/safetensors.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;
  double seconds;
};

Result shell(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(p.release());
  return {WEXITSTATUS(status), out,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// mpirun as root in a container: no binding (the test shares 2 cores with other tests).
std::string mpirun(int np) {
  return std::string(VIT_MPIRUN) + " --allow-run-as-root --oversubscribe --bind-to none -np " +
         std::to_string(np) + " ";
}

const std::string kVit = VIT_BINARY;
// 250 samples in batches of 64: the last batch (58) is uneven; dropout, drop path, mixup
// and CutMix, label smoothing and clipping all on, so each random stream is exercised.
const std::string kTrain =
    " train --model mnist-seed --img-size 16 --synthetic 250 -b 64 --threads 1 --seed 5 --drop 0.1 "
    "--drop-path 0.1 --attn-drop 0.1 --mixup 0.8 --cutmix 1.0 --smoothing 0.1 --clip-grad 1.0 --sched none ";

void expect_same_weights(const fs::path& a, const fs::path& b, double tol) {
  auto x = vit::SafeTensors::open((a / "last.safetensors").string());
  auto y = vit::SafeTensors::open((b / "last.safetensors").string());
  ASSERT_EQ(x.tensors().size(), y.tensors().size());
  for (auto& t : x.tensors()) {
    const auto u = x.to_float(t.name), v = y.to_float(t.name);
    ASSERT_EQ(u.size(), v.size()) << t.name;
    if (tol == 0)
      EXPECT_EQ(0, std::memcmp(u.data(), v.data(), u.size() * sizeof(float))) << t.name << " differs";
    else
      EXPECT_TRUE(vit::test::close_rel_max(t.name, u.data(), v.data(), int64_t(u.size()), tol));
  }
}

// The interrupted run's args.json with more epochs: a constant lr makes the first epochs
// of a longer run the same as a shorter run, so "2 epochs, then resume to 3" is "3 epochs".
void extend_epochs(const fs::path& dir, int epochs) {
  auto args = nlohmann::json::parse(vit::read_text_file((dir / "args.json").string()));
  if (args.is_object())  // the run's settings, {flag: value}
    args["epochs"] = epochs;
  else  // an older run's command line
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--epochs") args[i + 1] = std::to_string(epochs);
  vit::write_file_atomic((dir / "args.json").string(), args.dump());
}

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!VIT_HAVE_MPI)
      GTEST_SKIP() << "built without MPI: install libopenmpi-dev openmpi-bin and reconfigure";
  }
};

}  // namespace

TEST_F(Mpi, TwoProcessesTrainTheSameWeightsAsOne) {
  vit::test::TempDir tmp("mpi_same");
  const fs::path one = fs::path(tmp.str()) / "one", two = fs::path(tmp.str()) / "two";
  const fs::path np1 = fs::path(tmp.str()) / "np1", two_again = fs::path(tmp.str()) / "two_again";
  Result r = shell(kVit + kTrain + "--epochs 2 --output " + one.string());
  ASSERT_EQ(r.code, 0) << r.out;
  r = shell(mpirun(2) + kVit + kTrain + "--epochs 2 --output " + two.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 processes"), std::string::npos) << r.out;
  expect_same_weights(one, two, 2e-4);
  r = shell(mpirun(2) + kVit + kTrain + "--epochs 2 --output " + two_again.string());
  ASSERT_EQ(r.code, 0) << r.out;
  expect_same_weights(two, two_again, 0);
  r = shell(mpirun(1) + kVit + kTrain + "--epochs 2 --output " + np1.string());
  ASSERT_EQ(r.code, 0) << r.out;
  expect_same_weights(one, np1, 0);
}

// With --grad-accum-steps each rank runs its rows of the global batch as micro-batches:
// two processes at -b 32 x 2 train as one process at -b 64 (the tolerance of the test
// above: only the order of the sums differs), and again with the same bits.
TEST_F(Mpi, TwoProcessesAccumulatingTrainAsOneProcessWithTheGlobalBatch) {
  vit::test::TempDir tmp("mpi_accum");
  const fs::path one = fs::path(tmp.str()) / "one", two = fs::path(tmp.str()) / "two";
  const fs::path two_again = fs::path(tmp.str()) / "two_again";
  const std::string accum = "--epochs 2 -b 32 --grad-accum-steps 2 --output ";
  Result r = shell(kVit + kTrain + "--epochs 2 -b 64 --output " + one.string());
  ASSERT_EQ(r.code, 0) << r.out;
  r = shell(mpirun(2) + kVit + kTrain + accum + two.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("batch 64 (32 x 2 accumulation steps)"), std::string::npos) << r.out;
  expect_same_weights(one, two, 2e-4);
  r = shell(mpirun(2) + kVit + kTrain + accum + two_again.string());
  ASSERT_EQ(r.code, 0) << r.out;
  expect_same_weights(two, two_again, 0);
}

// Rank 0 draws the eval's progress for all: its share's images scaled to the whole set, so
// the bar ends at the set's 50 images (synthetic 250: 50 to evaluate), not at its own 25.
TEST_F(Mpi, TheEvalProgressCountsTheWholeSet) {
  Result r = shell(mpirun(2) + kVit + kTrain + "--epochs 1 --progress bar");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 1/1 eval"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 50/50 images"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("25/25 images"), std::string::npos) << r.out;
}

TEST_F(Mpi, ResumeContinuesAcrossAChangeOfProcessCount) {
  vit::test::TempDir tmp("mpi_resume");
  const fs::path straight = fs::path(tmp.str()) / "straight";
  Result r = shell(kVit + kTrain + "--epochs 3 --output " + straight.string());
  ASSERT_EQ(r.code, 0) << r.out;
  // Two epochs with 2 processes, resumed to 3 by one; and the other way round.
  for (auto [first, then] : {std::pair{2, 1}, std::pair{1, 2}}) {
    const fs::path dir = fs::path(tmp.str()) / ("from" + std::to_string(first));
    r = shell(mpirun(first) + kVit + kTrain + "--epochs 2 --output " + dir.string());
    ASSERT_EQ(r.code, 0) << r.out;
    extend_epochs(dir, 3);
    r = shell((then > 1 ? mpirun(then) : "") + kVit + " train --resume " + dir.string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("resuming"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("epoch 3/3"), std::string::npos) << r.out;
    expect_same_weights(straight, dir, 2e-4);
  }
}

// SIGTERM to rank 1 alone, within epoch 2 (MPMD: rank 1's vit under a shell that waits for
// epoch 1's state, then 20 ms, then signals it): its request to stop travels in the step's
// status exchange, so both ranks stop after the same step with one recovery state written by
// rank 0, which says why; --resume ends with the bits of a run never stopped. (Signalled at
// an epoch's end instead, the ranks agree in a collective of their own: "after epoch N".)
TEST_F(Mpi, ASigtermToOneRankStopsEveryRankAfterTheSameStepAndTheResumeEndsWithTheSameBits) {
  vit::test::TempDir tmp("mpi_stop");
  const fs::path ref = fs::path(tmp.str()) / "ref";
  // 64 steps an epoch (about 0.2 s here); a rank that stopped alone would leave the other
  // waiting: --comm-timeout ends that in 30 s.
  const std::string run =
      " train --model mnist-seed --synthetic 4096 -b 64 --threads 1 --seed 5 --epochs 4 "
      "--recovery-interval 0 --log-every 0 --comm-timeout 30 --output ";
  Result r = shell(mpirun(2) + kVit + run + ref.string());
  ASSERT_EQ(r.code, 0) << r.out;
  fs::path dir;
  for (int attempt = 0; attempt < 3; ++attempt) {  // until one lands within an epoch
    dir = fs::path(tmp.str()) / ("run" + std::to_string(attempt));
    const std::string state = (dir / "last.state.safetensors").string();
    r = shell(mpirun(1) + kVit + run + dir.string() + " : -np 1 sh -c '" + kVit + run + dir.string() +
              " & pid=$!; while [ ! -e " + state +
              " ]; do sleep 0.001; done; sleep 0.02; kill -TERM $pid; wait $pid'");
    EXPECT_NE(r.code, 0) << r.out;
    if (fs::exists(dir / "recovery.state.safetensors")) break;
    std::cout << "no recovery state (attempt " << attempt + 1
              << "; a signal at an epoch's end leaves none): " << r.out << "\n";
  }
  ASSERT_NE(r.out.find("vit train: a signal to another rank: stopped after step "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(": the run's state is in " + (dir / "recovery.state.safetensors").string() +
                       "; continue with: vit train --resume " + dir.string()),
            std::string::npos)
      << r.out;
  r = shell(mpirun(2) + kVit + " train --resume " + dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resuming " + dir.string() + " in epoch "), std::string::npos) << r.out;
  expect_same_weights(ref, dir, 0);
}

TEST_F(Mpi, ARankThatCannotReadItsDataStopsTheJobWithAMessageFromRank0) {
  // MPMD launch: rank 1 gets a data directory that does not exist.
  const std::string common = " train --model mnist-seed --img-size 16 -b 64 --threads 1 --epochs 1 ";
  Result r = shell(mpirun(1) + kVit + common + "--synthetic 250 : -np 1 " + kVit + common +
                   "--data-dir /nonexistent/data");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vit: error: rank 1: loading the data: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/data"), std::string::npos) << r.out;
}

// Any flag that changes the run, augmentation and the EMA too (a rank given another --hflip
// or --model-ema-decay trained without a word); a process's own --workers is not one.
TEST_F(Mpi, MismatchedFlagsAcrossRanksAreDetectedAtStart) {
  const std::string common = " train --model mnist-seed --img-size 16 --synthetic 250 -b 64 --threads 1 ";
  for (auto [a, b] : {std::pair{"--lr 0.01", "--lr 0.02"},
                      {"--hflip 0.5", "--hflip 0.4"},
                      {"--model-ema --model-ema-decay 0.9", "--model-ema --model-ema-decay 0.99"}}) {
    Result r = shell(mpirun(1) + kVit + common + a + " : -np 1 " + kVit + common + b);
    EXPECT_NE(r.code, 0) << a << " / " << b << "\n" << r.out;
    EXPECT_NE(r.out.find("the ranks disagree"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("rank 1 has training flags hash="), std::string::npos) << r.out;
  }
  Result r = shell(mpirun(1) + kVit + common + "--epochs 1 : -np 1 " + kVit + common + "--epochs 1 -j 2");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(Mpi, ARankThatHangsOrDiesEndsTheJobInsteadOfHanging) {
  // Rank 1 is stopped (SIGSTOP) after 2 s: rank 0 gives up after --comm-timeout 3.
  const std::string common =
      " train --model mnist-seed --img-size 16 --synthetic 4000 -b 64 --threads 1 --epochs 500 "
      "--comm-timeout 3 ";
  Result r = shell(mpirun(1) + kVit + common + ": -np 1 timeout -s STOP 2 " + kVit + common);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.seconds, 60) << r.out;
  EXPECT_NE(r.out.find("rank 0: no answer from the other ranks for 3 s"), std::string::npos) << r.out;
  // Rank 1 is killed after 2 s: mpirun ends the job.
  r = shell(mpirun(1) + kVit + common + ": -np 1 timeout -s KILL 2 " + kVit + common);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.seconds, 60) << r.out;
}
