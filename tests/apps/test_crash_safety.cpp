// Crash safety of `vit train`, end to end: a run killed with SIGKILL at random moments and
// resumed ends with the same weights as an uninterrupted run, bit for bit; a checkpoint write
// that fails part-way (RLIMIT_FSIZE) or a read-only run directory leaves the previous files
// readable and names the file; a run whose loss turns NaN/Inf stops with a message and keeps
// its last good checkpoint; SIGTERM or SIGINT stops a run after its step with a state that
// resumes to the same bits, a second SIGINT ends it at once, and an ignored one stays ignored.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "support/process.h"
#include "support/same_tensors.h"
#include "support/temp_dir.h"
#include "train/run_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::ChildOptions;
using vit::test::expect_same_tensors;
using vit::test::Finished;
using Clock = std::chrono::steady_clock;

// 6 epochs of 64 steps (about 0.5 s each here): long enough to kill mid-run.
const std::string kRun =
    "train --model mnist-seed --img-size 16 --synthetic 4096 --epochs 6 -b 64 --threads 1";

std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}
}  // namespace

TEST(CrashSafety, KillMinus9AtRandomMomentsThenResumeGivesTheUninterruptedWeights) {
  vit::test::TempDir tmp("kill");
  const auto t0 = Clock::now();
  Finished ref = vit::test::run_child(VIT_BINARY, kRun + " --output " + (tmp / "ref"), {tmp / "ref.log"});
  const double run_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(ref.code, 0) << ref.out;

  std::mt19937 rng(7);  // fixed: the same moments each time the test runs
  int killed_mid_run = 0, killed_mid_write = 0;
  // Trials 0-2 kill at random moments; trial 3 watches for a checkpoint's temporary file
  // and kills as soon as it sees one, to aim at the write itself (best effort: a write can
  // finish between two looks, so that kill is reported, not required).
  for (int trial = 0; trial < 4; ++trial) {
    const std::string dir = tmp / ("run" + std::to_string(trial)), log = tmp / ("run.log");
    // A random share of the remaining five epochs, measured on the reference run. When the
    // machine got quicker since (other load gone), a run may end before its kill: then it
    // runs again with half the delay, so that the kill still lands in the run.
    double delay_s = std::uniform_real_distribution<double>(0.0, 0.8)(rng) * run_s * 5 / 6;
    bool alive = false, mid_write = false;
    for (int attempt = 0; attempt < (trial < 3 ? 5 : 1) && !alive; ++attempt, delay_s /= 2) {
      fs::remove_all(dir);
      const pid_t pid = vit::test::spawn(VIT_BINARY, kRun + " --output " + dir, {log});
      // Wait for the first checkpoint, then the delay.
      const auto start = Clock::now();
      while (!fs::exists(fs::path(dir) / "last.state.safetensors") &&
             Clock::now() - start < std::chrono::minutes(5))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_TRUE(fs::exists(fs::path(dir) / "last.state.safetensors")) << vit::read_text_file(log);
      if (trial < 3) {
        std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
      } else {
        const auto from = Clock::now();
        while (!(mid_write = !temp_files(dir).empty()) &&
               Clock::now() - from < std::chrono::duration<double>(run_s))
          std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      int status = 0;
      alive = ::waitpid(pid, &status, WNOHANG) == 0;
      if (!alive) continue;  // reaped: finished before the kill
      ::kill(pid, SIGKILL);
      Finished k = vit::test::wait_for(pid, log);
      if (k.signal == 0) {  // it ended between the look above and the kill: as if not alive
        ASSERT_EQ(k.code, 0) << k.out;
        alive = false;
        continue;
      }
      ASSERT_EQ(k.signal, SIGKILL) << k.out;
      killed_mid_write += mid_write;
      ++killed_mid_run;
    }
    Finished res = vit::test::run_child(VIT_BINARY, "train --resume " + dir + " --threads 1", {log});
    ASSERT_EQ(res.code, 0) << res.out;
    // A kill can land after the run's last state, while it prints its last lines and exits
    // (seen once in CI on a loaded machine): the resume then finds the run finished. That kill
    // did not land during the run, and is not counted as one.
    if (alive && res.out.find("this run is finished") != std::string::npos) {
      killed_mid_run -= 1, killed_mid_write -= mid_write;
    } else if (alive) {
      EXPECT_NE(res.out.find("resuming"), std::string::npos) << res.out;
    }
    EXPECT_TRUE(temp_files(dir).empty()) << temp_files(dir).front();
    expect_same_tensors(tmp / "ref/last.safetensors", dir + "/last.safetensors");
    expect_same_tensors(tmp / "ref/last.state.safetensors", dir + "/last.state.safetensors");
    EXPECT_EQ(vit::read_text_file(tmp / "ref/summary.csv").substr(0, 60),
              vit::read_text_file(dir + "/summary.csv").substr(0, 60));
  }
  EXPECT_GE(killed_mid_run, 3) << "the kills must land while the run is still going";
  std::cout << killed_mid_run << " of 4 kills during the run, " << killed_mid_write
            << " while a checkpoint's temporary file existed\n";
}

namespace {
// 3 epochs of 256 steps with a recovery state every 16 steps (about 0.15 s an epoch here).
const std::string kRecoveryRun =
    "train --model mnist-seed --img-size 16 --synthetic 4096 --epochs 3 -b 16 --threads 1 --log-every 0 "
    "--recovery-interval 16";

// summary.csv without its last column (seconds, which no two runs share).
std::string without_seconds(const std::string& csv) {
  std::string out;
  for (size_t at = 0, nl; (nl = csv.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = csv.substr(at, nl - at);
    out += line.substr(0, line.rfind(',')) + "\n";
  }
  return out;
}

// The resumed run ends as the uninterrupted one: the same bytes in its checkpoints, the
// same tensors in its state, the same summary but for the seconds.
void expect_same_run(const std::string& ref, const std::string& dir) {
  for (const char* f : {"last.safetensors", "best.safetensors", "config.json"})
    EXPECT_TRUE(vit::read_file_bytes(ref + "/" + f) == vit::read_file_bytes(dir + "/" + f))
        << f << " differs";
  expect_same_tensors(ref + "/last.state.safetensors", dir + "/last.state.safetensors");
  EXPECT_EQ(without_seconds(vit::read_text_file(ref + "/summary.csv")),
            without_seconds(vit::read_text_file(dir + "/summary.csv")));
  EXPECT_FALSE(fs::exists(dir + "/recovery.state.safetensors")) << "removed after the last epoch's state";
  EXPECT_TRUE(temp_files(dir).empty()) << temp_files(dir).front();
}

// Starts the recovery run (plus `flags`) into `dir` and kills it with SIGKILL as soon as ready() holds
// (polled every 0.1 ms), then asks landed() whether the kill hit the moment wanted. A kill
// that came too late (the test was not scheduled in time on a busy machine) is tried
// again, up to 5 times. Returns whether one landed.
bool kill_when(const std::string& dir, const std::string& log, const std::function<bool()>& ready,
               const std::function<bool()>& landed, const std::string& flags = "") {
  for (int attempt = 0; attempt < 5; ++attempt) {
    fs::remove_all(dir);
    const pid_t pid = vit::test::spawn(VIT_BINARY, kRecoveryRun + flags + " --output " + dir, {log});
    const auto start = Clock::now();
    while (!ready() && Clock::now() - start < std::chrono::minutes(1))
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    int status = 0;
    const bool alive = ::waitpid(pid, &status, WNOHANG) == 0;
    if (alive) {
      ::kill(pid, SIGKILL);
      EXPECT_EQ(vit::test::wait_for(pid, log).signal, SIGKILL);
    }
    if (alive && landed()) return true;
    std::cout << "the kill came too late (attempt " << attempt + 1 << "): " << vit::read_text_file(log)
              << "\n";
  }
  return false;
}

// The run's newest state, if it is a recovery state after epoch 1 (none while it is written).
std::optional<vit::StateInfo> recovery_after_epoch_1(const std::string& dir) {
  try {
    auto s = vit::newest_state(dir);
    if (s && s->epochs_done >= 1 && s->step_in_epoch > 0) return s;
  } catch (const vit::Error&) {
  }
  return std::nullopt;
}
}  // namespace

// Killed the moment its directory appears: the directory holds args.json (it appears with
// it) and no training state; --resume starts from step 0 and ends with the same bits.
TEST(CrashSafety, KilledAsSoonAsItsDirectoryAppearsResumesFromStepZeroToTheSameBits) {
  vit::test::TempDir tmp("kill_early");
  Finished ref =
      vit::test::run_child(VIT_BINARY, kRecoveryRun + " --output " + (tmp / "ref"), {tmp / "ref.log"});
  ASSERT_EQ(ref.code, 0) << ref.out;
  const std::string dir = tmp / "run";
  ASSERT_TRUE(kill_when(
      dir, tmp / "run.log", [&] { return fs::exists(dir); },
      [&] {
        return !fs::exists(dir + "/last.state.safetensors") &&
               !fs::exists(dir + "/recovery.state.safetensors");
      }));
  ASSERT_TRUE(fs::exists(dir + "/args.json"));
  Finished res = vit::test::run_child(VIT_BINARY, "train --resume " + dir, {tmp / "res.log"});
  ASSERT_EQ(res.code, 0) << res.out;
  EXPECT_NE(
      res.out.find(dir +
                   " holds no training state yet (the run stopped before its first): starting from step 0"),
      std::string::npos)
      << res.out;
  expect_same_run(tmp / "ref", dir);
}

namespace {
// Killed within epoch 2 or 3, after a recovery state: --resume goes on after that state's
// step (not from the epoch's start) and ends with the same bits. `flags` are added to
// kRecoveryRun; `files` are more files that must end byte-identical.
void killed_mid_epoch(const std::string& name, const std::string& flags,
                      const std::vector<std::string>& files) {
  vit::test::TempDir tmp(name);
  Finished ref = vit::test::run_child(VIT_BINARY, kRecoveryRun + flags + " --output " + (tmp / "ref"),
                                      {tmp / "ref.log"});
  ASSERT_EQ(ref.code, 0) << ref.out;
  EXPECT_NE(ref.out.find("recovery state after step 16 of epoch 1"), std::string::npos) << ref.out;
  const std::string dir = tmp / "run";
  auto mid_epoch = [&] { return recovery_after_epoch_1(dir).has_value(); };
  ASSERT_TRUE(kill_when(dir, tmp / "run.log", mid_epoch, mid_epoch, flags));
  const vit::StateInfo at = *recovery_after_epoch_1(dir);
  Finished res = vit::test::run_child(VIT_BINARY, "train --resume " + dir, {tmp / "res.log"});
  ASSERT_EQ(res.code, 0) << res.out;
  EXPECT_NE(res.out.find("resuming " + dir + " in epoch " + std::to_string(at.epochs_done + 1) +
                         " after step " + std::to_string(at.step_in_epoch) + " of 256 (global step " +
                         std::to_string(at.global_step) + ", recovery.state.safetensors)"),
            std::string::npos)
      << res.out;
  expect_same_run(tmp / "ref", dir);
  for (const std::string& f : files)
    EXPECT_TRUE(vit::read_file_bytes(tmp / "ref/" + f) == vit::read_file_bytes(dir + "/" + f))
        << f << " differs";
}
}  // namespace

TEST(CrashSafety, KilledMidEpochResumesAfterItsRecoveryStateToTheSameBits) {
  killed_mid_epoch("kill_mid", "", {});
}

// The same with gradient accumulation (global batches of 16 as 2 x 8: the kill can land
// between a step's micro-batches; states follow optimizer steps) and a model EMA.
TEST(CrashSafety, KilledMidEpochWithAccumulationAndAModelEmaResumesToTheSameBits) {
  killed_mid_epoch("kill_mid_accum", " -b 8 --grad-accum-steps 2 --model-ema --model-ema-warmup",
                   {"last_ema.safetensors", "best_ema.safetensors"});
}

TEST(CrashSafety, ACheckpointWriteThatFailsPartWayKeepsThePreviousFileAndNamesIt) {
  vit::test::TempDir tmp("fsize");
  const std::string run =
      "train --model mnist-seed --img-size 16 --synthetic 32 --epochs 1 -b 32 --threads 1 "
      "--output " +
      (tmp / "run");
  Finished first = vit::test::run_child(VIT_BINARY, run, {tmp / "a.log"});
  ASSERT_EQ(first.code, 0) << first.out;
  const std::string state = tmp / "run/last.state.safetensors", weights = tmp / "run/last.safetensors";
  const auto before = vit::read_file_bytes(state);
  const auto weights_size = fs::file_size(weights);
  ASSERT_GT(before.size(), weights_size + 4096);
  // The run trained one epoch longer, allowed files up to the weights' size: the weights
  // are rewritten, the (larger) training state fails part-way through its write.
  ChildOptions o{tmp / "b.log", (long long)(weights_size + 1024)};
  Finished second = vit::test::run_child(VIT_BINARY, "train --resume " + (tmp / "run") + " --epochs 2", o);
  EXPECT_NE(second.code, 0) << second.out;
  EXPECT_NE(second.out.find(state), std::string::npos) << "the error names the file: " << second.out;
  EXPECT_NE(second.out.find("File too large"), std::string::npos) << second.out;
  EXPECT_EQ(vit::read_file_bytes(state), before) << "the previous training state is untouched";
  EXPECT_NO_THROW(vit::SafeTensors::open(state));
  EXPECT_NO_THROW(vit::SafeTensors::open(weights));
  EXPECT_TRUE(temp_files(tmp / "run").empty()) << temp_files(tmp / "run").front();
}

TEST(CrashSafety, AReadOnlyRunDirectoryKeepsItsCheckpointsAndNamesTheFile) {
  vit::test::TempDir tmp("readonly");
  const std::string run =
      "train --model mnist-seed --img-size 16 --synthetic 32 --epochs 1 -b 32 --threads 1 --output " +
      (tmp / "run");
  Finished first = vit::test::run_child(VIT_BINARY, run, {tmp / "a.log"});
  ASSERT_EQ(first.code, 0) << first.out;
  std::map<std::string, std::vector<char>> before;
  for (const auto& e : fs::directory_iterator(tmp / "run"))
    before[e.path().string()] = vit::read_file_bytes(e.path().string());
  // Read-only for the run: mode 0555, and, since root writes anywhere, the run as `nobody`.
  fs::permissions(tmp / "run", fs::perms(0555));
  fs::permissions(tmp.str(), fs::perms(0755));
  // nobody runs a copy of the program in the temp dir: the build tree may sit where only
  // root can enter (a CI checkout under /root).
  ChildOptions o{tmp / "b.log"};
  std::string program = VIT_BINARY;
  if (::geteuid() == 0) {
    o.uid = 65534;
    program = tmp / "vit";
    fs::copy_file(VIT_BINARY, program);
  }
  Finished second = vit::test::run_child(program, "train --resume " + (tmp / "run") + " --epochs 2", o);
  fs::permissions(tmp / "run", fs::perms(0755));
  if (second.code == vit::test::kCannotSwitchUser || second.code == 127)
    GTEST_SKIP() << "running as root and cannot run " << program << " as nobody (exit " << second.code << ")";
  EXPECT_NE(second.code, 0) << second.out;
  EXPECT_NE(second.out.find(tmp / "run"), std::string::npos) << "the error names the file: " << second.out;
  EXPECT_NE(second.out.find("Permission denied"), std::string::npos) << second.out;
  std::map<std::string, std::vector<char>> after;
  for (const auto& e : fs::directory_iterator(tmp / "run"))
    after[e.path().string()] = vit::read_file_bytes(e.path().string());
  EXPECT_TRUE(after == before) << "the run directory is unchanged";
  EXPECT_NO_THROW(vit::SafeTensors::open(tmp / "run/last.safetensors"));
  // An unfinished run (args.json asks for 2 epochs) resumed without --epochs writes nothing
  // until an epoch ends: the directory is tried first, not after an epoch's work.
  nlohmann::json args = nlohmann::json::parse(vit::read_text_file(tmp / "run/args.json"));
  args["epochs"] = 2;
  vit::write_file_atomic(tmp / "run/args.json", args.dump(1) + "\n");
  fs::permissions(tmp / "run", fs::perms(0555));
  Finished third = vit::test::run_child(program, "train --resume " + (tmp / "run"), o);
  fs::permissions(tmp / "run", fs::perms(0755));
  EXPECT_NE(third.code, 0) << third.out;
  EXPECT_NE(third.out.find("Permission denied"), std::string::npos) << third.out;
  EXPECT_EQ(third.out.find("epoch 2/2"), std::string::npos) << "no epoch trained first: " << third.out;
}

TEST(CrashSafety, ALossThatTurnsNonFiniteStopsTheRunAndKeepsTheLastGoodCheckpoint) {
  vit::test::TempDir tmp("nan");
  // Step decay by x10 after every optimizer step (half an epoch of 2 steps) from lr 1e-4: the first epochs
  // are sane, then the lr passes FLT_MAX at step 44 of 80, so the weights must become Inf/NaN.
  Finished r = vit::test::run_child(
      VIT_BINARY,
      "train --model mnist-seed --img-size 16 --synthetic 64 -b 32 --epochs 40 --threads 1 --opt momentum "
      "--sched step --lr 1e-4 --decay-rate 10 --decay-epochs 0.5 --output " +
          (tmp / "run"),
      {tmp / "log"});
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("training diverged"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("last good checkpoint"), std::string::npos) << r.out;
  const vit::SafeTensors last = vit::SafeTensors::open(tmp / "run/last.safetensors");
  const int epoch = std::stoi(last.metadata().at("epoch"));
  EXPECT_GE(epoch, 1);
  EXPECT_NE(r.out.find("(epoch " + std::to_string(epoch) + ")"), std::string::npos) << r.out;
  for (const auto& t : last.tensors())
    for (float v : last.to_float(t.name))
      ASSERT_TRUE(std::isfinite(v)) << t.name << " in the kept checkpoint";
}

// Finite weights of ~1e30 (--lr 1e30) give NaN outputs on every input: the evaluation's NaN
// loss ended the run with exit 0 and a NaN model as best.safetensors and last.safetensors.
TEST(CrashSafety, ANonFiniteEvaluationStopsTheRunAsANonFiniteLossDoes) {
  vit::test::TempDir tmp("nan_eval");
  Finished r = vit::test::run_child(
      VIT_BINARY,
      "train --model mnist-seed --img-size 16 --synthetic 64 --epochs 2 --threads 1 --lr 1e30 --output " +
          (tmp / "run"),
      {tmp / "log"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("training diverged: the evaluation loss is nan (not finite) at epoch 1"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(tmp / "run/best.safetensors")) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "run/last.safetensors")) << r.out;
}

namespace {
// 3 epochs of 256 steps, no recovery states but the one a stop writes.
const std::string kStopRun =
    "train --model mnist-seed --img-size 16 --synthetic 4096 --epochs 3 -b 16 --threads 1 --log-every 0 "
    "--recovery-interval 0";

// Starts `args` with `o`, waits (up to a minute) until ready() holds, then sends `sig` if the
// child still runs. Returns the pid, or -1 (reaped) when the child had already ended.
pid_t signal_when(const std::string& args, const ChildOptions& o, const std::function<bool()>& ready,
                  int sig) {
  const pid_t pid = vit::test::spawn(VIT_BINARY, args, o);
  const auto start = Clock::now();
  while (!ready() && Clock::now() - start < std::chrono::minutes(1))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != 0) return -1;
  ::kill(pid, sig);
  return pid;
}

bool log_has(const std::string& log, const std::string& text) {
  try {
    return vit::read_text_file(log).find(text) != std::string::npos;
  } catch (const vit::Error&) {
    return false;
  }
}

// kStopRun into `dir`, sent `sig` once its first epoch's state is written (tried again when
// the run ended first: a busy machine); the last attempt's end.
Finished stop_after_first_epoch(const std::string& dir, const std::string& log, int sig) {
  Finished run;
  for (int attempt = 0; attempt < 5; ++attempt) {
    fs::remove_all(dir);  // ready() asks for its state: nothing stale is seen
    const pid_t pid = signal_when(
        kStopRun + " --output " + dir, {log}, [&] { return fs::exists(dir + "/last.state.safetensors"); },
        sig);
    if (pid < 0) continue;
    run = vit::test::wait_for(pid, log);
    if (run.code != 0) break;
  }
  return run;
}
}  // namespace

// SIGTERM (a scheduler's notice) within epoch 2 or 3: the run stops after its step with a
// recovery state, exits 143 and says how to go on; --resume ends with the uninterrupted bits.
TEST(CrashSafety, ASigtermStopsAfterTheStepWithAStateAndTheResumeEndsWithTheSameBits) {
  vit::test::TempDir tmp("sigterm");
  Finished ref = vit::test::run_child(VIT_BINARY, kStopRun + " --output " + (tmp / "ref"), {tmp / "ref.log"});
  ASSERT_EQ(ref.code, 0) << ref.out;
  const std::string dir = tmp / "run";
  const Finished run = stop_after_first_epoch(dir, tmp / "run.log", SIGTERM);
  ASSERT_EQ(run.code, 143) << run.out;
  EXPECT_NE(run.out.find("vit train: SIGTERM: stopping after this step\n"), std::string::npos) << run.out;
  // Mid-epoch (almost always) the recovery state; at an epoch's last step the epoch's own.
  const bool mid = fs::exists(dir + "/recovery.state.safetensors");
  const std::string state = dir + (mid ? "/recovery.state.safetensors" : "/last.state.safetensors");
  EXPECT_NE(run.out.find("vit train: SIGTERM: stopped after " + std::string(mid ? "step " : "epoch ")),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(": the run's state is in " + state + "; continue with: vit train --resume " + dir),
            std::string::npos)
      << run.out;
  EXPECT_TRUE(temp_files(dir).empty());
  Finished res = vit::test::run_child(VIT_BINARY, "train --resume " + dir, {tmp / "res.log"});
  ASSERT_EQ(res.code, 0) << res.out;
  expect_same_run(tmp / "ref", dir);
}

// SIGHUP (the terminal or ssh session closed) is a request to stop as SIGTERM is: the run
// stops after its step with a state to resume and exits 129 (its default action ended it at
// once, losing the steps since the last epoch's state).
TEST(CrashSafety, ASighupStopsAfterTheStepWithAState) {
  vit::test::TempDir tmp("sighup");
  const std::string dir = tmp / "run";
  const Finished run = stop_after_first_epoch(dir, tmp / "run.log", SIGHUP);
  ASSERT_EQ(run.code, 129) << run.out;
  EXPECT_NE(run.out.find("vit train: SIGHUP: stopping after this step\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("vit train: SIGHUP: stopped after "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("; continue with: vit train --resume " + dir), std::string::npos) << run.out;
  EXPECT_TRUE(fs::exists(dir + "/recovery.state.safetensors") || fs::exists(dir + "/last.state.safetensors"));
  EXPECT_TRUE(temp_files(dir).empty());
}

namespace {
// Starts ViT-Ti/16 for 2 epochs of 4 steps (steps of 32 images take seconds), sends `sig` once
// training has started and again as soon as the first's message is out, while the process
// still runs (tried again, in a directory of its own, when the step ended first). `dir` is
// the run directory of the attempt returned.
Finished signal_twice(const vit::test::TempDir& tmp, int sig, const std::string& message, std::string& dir) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    dir = tmp / ("run" + std::to_string(attempt));
    const std::string log = dir + ".log";
    const pid_t pid = signal_when(
        "train --model vit-tiny-16 --synthetic 128 -b 32 --epochs 2 --threads 1 --log-every 1 --output " +
            dir,
        {log}, [&] { return log_has(log, "\ntraining "); }, sig);
    if (pid < 0) continue;
    const auto start = Clock::now();
    while (!log_has(log, message) && Clock::now() - start < std::chrono::minutes(1))
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) != 0) {  // already ended: the second came too late
      std::cout << "the step ended before the second signal (attempt " << attempt + 1 << ")\n";
      continue;
    }
    ::kill(pid, sig);
    return vit::test::wait_for(pid, log);
  }
  ADD_FAILURE() << "each attempt ended before the second signal";
  return {};
}
}  // namespace

// A second Ctrl-C while the step still runs ends the program at once (SIGINT's default
// action), with no recovery state.
TEST(CrashSafety, ASecondSigintEndsTheRunAtOnce) {
  vit::test::TempDir tmp("sigint2");
  std::string dir;
  const Finished run = signal_twice(
      tmp, SIGINT, "vit train: SIGINT: stopping after this step (Ctrl-C again stops at once)", dir);
  EXPECT_EQ(run.signal, SIGINT) << run.out;
  EXPECT_FALSE(fs::exists(dir + "/recovery.state.safetensors")) << "stopped at once, not after the step";
}

// A second SIGTERM changes nothing (a scheduler may send it twice, to mpirun and to the ranks):
// the run still stops after its step with its state and exits 143.
TEST(CrashSafety, ASecondSigtermIsStillARequestToStopAfterTheStep) {
  vit::test::TempDir tmp("sigterm2");
  std::string dir;
  const Finished run = signal_twice(tmp, SIGTERM, "vit train: SIGTERM: stopping after this step\n", dir);
  EXPECT_EQ(run.signal, 0) << run.out;
  EXPECT_EQ(run.code, 143) << run.out;
  EXPECT_NE(run.out.find("vit train: SIGTERM: stopped after "), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("stopping after this step"), run.out.rfind("stopping after this step"))
      << "said once: " << run.out;
}

// The stop signals reach vit train through a thread of its own: every other thread (the one
// that computes, OpenMP's, the prefetcher's) blocks SIGINT, SIGTERM and SIGHUP, so that no
// handler interrupts a product. A SIGTERM handled inside oneDNN's AVX-512 sgemm corrupted the heap
// about one time in five (docs/reliability.md). Read from /proc while the run trains on 2
// threads (1000 epochs: still training when read, then killed): each thread's SigBlk mask.
TEST(CrashSafety, OneThreadAloneTakesTheStopSignals) {
  vit::test::TempDir tmp("sigmask");
  const std::string log = tmp / "run.log";
  const pid_t pid = vit::test::spawn(
      VIT_BINARY,
      "train --model mnist-seed --img-size 16 --synthetic 4096 --epochs 1000 -b 16 --threads 2 --log-every 0 "
      "--recovery-interval 0 --output " +
          (tmp / "run"),
      ChildOptions{log});
  const auto start = Clock::now();
  while (!log_has(log, "\ntraining ") && Clock::now() - start < std::chrono::minutes(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the steps' threads are up
  const uint64_t all =
      (uint64_t(1) << (SIGINT - 1)) | (uint64_t(1) << (SIGTERM - 1)) | (uint64_t(1) << (SIGHUP - 1));
  int threads = 0, open = 0;
  std::string masks;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream status(task.path() / "status");  // (a /proc file has no size to read ahead)
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigBlk:", 0) == 0) {
        const uint64_t blocked = std::stoull(line.substr(7), nullptr, 16);
        ++threads;
        open += (blocked & all) != all;
        masks += task.path().filename().string() + ":" + line.substr(7) + " ";
      }
  }
  const bool running = log_has(log, "\ntraining ") && !log_has(log, "\nbest");
  ::kill(pid, SIGKILL);
  vit::test::wait_for(pid, log);
  ASSERT_TRUE(running) << "the run ended before its threads were read";
  EXPECT_GE(threads, 3) << masks;  // the computing thread, the signals' and the prefetcher's
  EXPECT_EQ(open, 1) << "threads that let SIGINT, SIGTERM or SIGHUP in: " << masks;
}

// A SIGINT the shell set to be ignored (a script's background job) stays ignored: the run ends
// as usual.
TEST(CrashSafety, AnIgnoredSigintStaysIgnored) {
  vit::test::TempDir tmp("sigign");
  const std::string dir = tmp / "run", log = tmp / "run.log";
  ChildOptions o{log};
  o.ignored_signals = {SIGINT};
  pid_t pid = -1;
  for (int attempt = 0; attempt < 5 && pid < 0; ++attempt) {
    fs::remove_all(dir);
    fs::remove(log);  // a stale log would say "training" before the new run starts
    pid = signal_when(
        kStopRun + " --output " + dir, o, [&] { return log_has(log, "\ntraining "); }, SIGINT);
  }
  ASSERT_GT(pid, 0) << "the run ended before the signal each time";
  Finished run = vit::test::wait_for(pid, log);
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_EQ(run.out.find("SIGINT"), std::string::npos) << run.out;
  EXPECT_FALSE(fs::exists(dir + "/recovery.state.safetensors"));
}

// An evaluation whose output cannot be written: a folder it may not write in fails before the
// evaluation (it failed after it, the numbers never printed), and a write that fails
// afterwards (a full disk: /dev/full) comes with the numbers.
TEST(CrashSafety, AnEvaluationsOutputsAreCheckedFirstAndItsNumbersKept) {
  vit::test::TempDir tmp("eval_out");
  Finished first = vit::test::run_child(
      VIT_BINARY,
      "train --model mnist-seed --synthetic 32 --epochs 1 -b 32 --threads 1 --output " + (tmp / "run"),
      {tmp / "a.log"});
  ASSERT_EQ(first.code, 0) << first.out;
  for (const char* cls : {"0", "1"}) {
    fs::create_directories(tmp / ("data/val/" + std::string(cls)));
    fs::copy_file(std::string(VIT_FIXTURE_DIR) + "/digit_7.png",
                  tmp / ("data/val/" + std::string(cls) + "/a.png"));
  }
  const std::string eval =
      "eval --checkpoint " + (tmp / "run") + " --data-dir " + (tmp / "data") + " --threads 1 ";
  Finished full = vit::test::run_child(VIT_BINARY, eval + "--results-file /dev/full", {tmp / "b.log"});
  EXPECT_NE(full.code, 0) << full.out;
  EXPECT_NE(full.out.find("top-1 "), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("(2 images); an output could not be written"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("No space left on device"), std::string::npos) << full.out;

  fs::create_directories(tmp / "ro");
  fs::permissions(tmp / "ro", fs::perms(0555));
  fs::permissions(tmp.str(), fs::perms(0755));
  ChildOptions o{tmp / "c.log"};
  std::string program = VIT_BINARY;
  if (::geteuid() == 0) {  // root writes anywhere: as nobody, from a copy it can reach
    o.uid = 65534;
    program = tmp / "vit";
    fs::copy_file(VIT_BINARY, program);
  }
  Finished ro =
      vit::test::run_child(program, eval + "--progress log --results-file " + (tmp / "ro/r.json"), o);
  fs::permissions(tmp / "ro", fs::perms(0755));
  if (ro.code == vit::test::kCannotSwitchUser || ro.code == 127)
    GTEST_SKIP() << "running as root and cannot run " << program << " as nobody (exit " << ro.code << ")";
  EXPECT_NE(ro.code, 0) << ro.out;
  EXPECT_NE(ro.out.find("--results-file " + (tmp / "ro/r.json") + ": cannot write in the folder " +
                        (tmp / "ro") + " (Permission denied)"),
            std::string::npos)
      << ro.out;
  EXPECT_EQ(ro.out.find("top-1"), std::string::npos) << "no evaluation ran: " << ro.out;
}
