// Run directories end to end: `vit train` never writes over a run (another --output into
// it is refused, --resume of a finished run changes nothing), --resume --epochs N trains a
// finished run longer, and one process at a time writes a run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "core/file.h"
#include "data/image.h"
#include "io/pretrained.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "support/process.h"
#include "support/run_vit.h"
#include "support/same_tensors.h"
#include "support/temp_dir.h"
#include "train/run_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::Result;
using vit::test::run;

const std::string kTrain = "train --model mnist-seed --img-size 16 --synthetic 128 -b 64 --threads 1 ";

// Every file in dir with its bytes.
std::map<std::string, std::vector<char>> snapshot(const std::string& dir) {
  std::map<std::string, std::vector<char>> files;
  for (const auto& e : fs::directory_iterator(dir))
    files[e.path().filename().string()] = vit::read_file_bytes(e.path().string());
  return files;
}

// The run's state as an older vitcpp wrote it: without the given keys of its vitcpp_state.
void forget_in_state(const std::string& dir, const std::vector<std::string>& keys) {
  const std::string path = dir + "/" + vit::kStateFile;
  const vit::SafeTensors old = vit::SafeTensors::open(path);
  std::vector<std::vector<float>> values;
  std::vector<vit::TensorOut> out;
  for (const vit::TensorInfo& t : old.tensors()) values.push_back(old.to_float(t.name));
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back({old.tensors()[i].name, old.tensors()[i].shape, vit::DType::F32, values[i].data()});
  nlohmann::json st = nlohmann::json::parse(old.metadata().at("vitcpp_state"));
  for (const std::string& key : keys) {
    ASSERT_TRUE(st.contains(key)) << key;
    st.erase(key);
  }
  vit::write_safetensors(path, out, {{"vitcpp_state", st.dump()}});
}

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}
}  // namespace

TEST(RunDir, ASecondTrainIntoAFinishedRunLeavesEveryFileByteIdentical) {
  vit::test::TempDir tmp("run_dir");
  const std::string dir = tmp / "run";
  const Result first = run(kTrain + "--epochs 2 --output " + dir);
  ASSERT_EQ(first.code, 0) << first.out;
  const auto before = snapshot(dir);
  ASSERT_EQ(before.count("last.state.safetensors"), 1u);

  // The issue's case: a shorter run into the finished run's directory (also with a slash).
  for (const std::string& out : {dir, dir + "/"}) {
    const Result again = run(kTrain + "--epochs 1 --seed 3 --output " + out);
    EXPECT_NE(again.code, 0) << again.out;
    EXPECT_TRUE(has(again.out, "--output " + out + " already holds a run (args.json, config.json"))
        << again.out;
    EXPECT_TRUE(has(again.out, "continue it with --resume " + out)) << again.out;
    EXPECT_TRUE(snapshot(dir) == before) << "a refused run changed " << dir;
  }
  // --resume of the finished run: says so, succeeds, writes nothing.
  const Result resumed = run("train --resume " + dir);
  EXPECT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(has(resumed.out, dir + ": this run is finished (2 of 2 epochs); nothing to do")) << resumed.out;
  EXPECT_TRUE(has(resumed.out, "--resume " + dir + " --epochs N (N > 2)")) << resumed.out;
  EXPECT_FALSE(has(resumed.out, "epoch 1/")) << resumed.out;
  EXPECT_TRUE(snapshot(dir) == before) << "--resume of a finished run changed " << dir;
  // Fewer epochs than done is an error, and changes nothing either.
  const Result fewer = run("train --resume " + dir + " --epochs 1");
  EXPECT_NE(fewer.code, 0) << fewer.out;
  EXPECT_TRUE(has(fewer.out, "--epochs 1 is fewer than the 2 epoch(s) the run in " + dir)) << fewer.out;
  EXPECT_TRUE(snapshot(dir) == before) << "--resume --epochs 1 changed " << dir;
}

// Two runs started at once into one existing empty directory: one trains, the other is
// refused, and the args.json left is the winner's, so the run resumes (the loser's used to
// replace it: "the run used seed ..." on resume, 6 times in 10).
TEST(RunDir, TwoRunsStartedAtOnceIntoOneDirectoryLeaveTheWinnersArgs) {
  vit::test::TempDir tmp("run_race");
  for (int i = 0; i < 8; ++i) {
    std::string name = "d";
    name += std::to_string(i);
    const std::string dir = tmp / name;
    fs::create_directories(dir);
    std::ostringstream both;  // two runs of other seeds, started together
    both << "(";
    for (int seed : {1, 2})
      both << VIT_BINARY << " " << kTrain << "--epochs 1 --log-every 0 --seed " << seed << " --output " << dir
           << " >/dev/null 2>&1 & ";
    both << "wait)";
    ASSERT_EQ(std::system(both.str().c_str()), 0);
    const Result r = run("train --resume " + dir + " --epochs 2");  // the state read against args.json
    EXPECT_EQ(r.code, 0) << i << ": " << r.out;
  }
}

// A bad value in a run's args.json is said to come from there (it read as a flag typed on
// the command line), and an args.json of a newer vitcpp is refused, not read as this one's.
TEST(RunDir, ABadArgsJsonIsNamedAndANewerOneRefused) {
  vit::test::TempDir tmp("run_badargs");
  const std::string dir = tmp / "run";
  ASSERT_EQ(run(kTrain + "--epochs 1 --log-every 0 --output " + dir).code, 0);
  const nlohmann::json good = nlohmann::json::parse(vit::read_text_file(dir + "/args.json"));
  nlohmann::json bad = good;
  bad["lr"] = "abc";
  vit::write_file_atomic(dir + "/args.json", bad.dump(1) + "\n");
  Result r = run("train --resume " + dir + " --epochs 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(dir + "/args.json (the run's settings): Could not convert: --lr = abc"),
            std::string::npos)
      << r.out;
  bad = good;
  bad["args-version"] = 999;
  vit::write_file_atomic(dir + "/args.json", bad.dump(1) + "\n");
  r = run("train --resume " + dir + " --epochs 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("args.json: written by a newer vitcpp (args-version 999"), std::string::npos) << r.out;
}

TEST(RunDir, ResumeWithMoreEpochsTrainsAFinishedRunLonger) {
  vit::test::TempDir tmp("run_longer");
  const std::string dir = tmp / "run";
  ASSERT_EQ(run(kTrain + "--epochs 1 --output " + dir).code, 0);
  const Result longer = run("train --resume " + dir + " --epochs 3");
  ASSERT_EQ(longer.code, 0) << longer.out;
  EXPECT_TRUE(has(longer.out, "resuming " + dir + " after epoch 1")) << longer.out;
  EXPECT_TRUE(has(longer.out, "epoch 3/3:")) << longer.out;
  EXPECT_FALSE(has(longer.out, "epoch 1/3:")) << longer.out;
  const std::string summary = vit::read_text_file(dir + "/summary.csv");
  EXPECT_TRUE(has(summary, "\n3,")) << summary;
  // The new length is the run's now: resuming again finds it finished at 3.
  EXPECT_TRUE(has(vit::read_text_file(dir + "/args.json"), "\"epochs\": 3,"))
      << vit::read_text_file(dir + "/args.json");
  const Result again = run("train --resume " + dir);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(has(again.out, "this run is finished (3 of 3 epochs)")) << again.out;
}

// A run resumed on another thread count splits its batches into other shards (one per thread
// by default), which gives other bits: the resume says so and names what keeps them, and
// that does keep them (the weights byte for byte those of the uninterrupted run; --sched none,
// so that the longer --epochs changes nothing else). Not the whole file: its metadata holds the
// eval loss, whose inference picks its own shard count by the work (ViT::infer_shards), so
// it may differ in the last bits (on the AVX2 path with the class-token tail it does).
TEST(RunDir, ResumeOnOtherShardsSaysSoAndVitShardsKeepsTheBits) {
  vit::test::TempDir tmp("run_shards");
  const std::string train = "train --model mnist-seed --img-size 16 --synthetic 128 -b 64 --sched none ";
  auto run = [](const std::string& args) { return vit::test::run_vit(args, "env -u VIT_SHARDS"); };
  const std::string whole = tmp / "whole", kept = tmp / "kept", other = tmp / "other";
  ASSERT_EQ(run(train + "--epochs 2 --threads 2 --output " + whole).code, 0);
  ASSERT_EQ(run(train + "--epochs 1 --threads 2 --output " + kept).code, 0);
  fs::copy(kept, other);
  const Result moved = run("train --resume " + other + " --epochs 2 --threads 1");
  ASSERT_EQ(moved.code, 0) << moved.out;
  EXPECT_TRUE(has(moved.out,
                  "note: the interrupted run split each batch into 2 shards, this one into 1 "
                  "shard: training goes on within float rounding of the uninterrupted run, not "
                  "bit for bit (VIT_SHARDS=2 keeps the weights' bits)\n"))
      << moved.out;
  const Result same =
      vit::test::run_vit("train --resume " + kept + " --epochs 2 --threads 1", "VIT_SHARDS=2");
  ASSERT_EQ(same.code, 0) << same.out;
  EXPECT_FALSE(has(same.out, "note: the interrupted run")) << same.out;
  // The tensors' bytes: what follows the header (its length, then the header itself).
  auto weights = [](const std::string& dir) {
    const std::vector<char> b = vit::read_file_bytes(dir + "/last.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, b.data(), sizeof n);
    return std::vector<char>(b.begin() + 8 + int64_t(n), b.end());
  };
  EXPECT_TRUE(weights(kept) == weights(whole))
      << "VIT_SHARDS=2 on one thread: not the uninterrupted run's weights";
  EXPECT_FALSE(weights(other) == weights(whole))
      << "one shard gave the two shards' bits: the note would be wrong";
}

// IDX files of n 8x8 images, labels i % 10.
void write_idx(const std::string& dir, const std::string& prefix, uint32_t n) {
  auto be32 = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  std::string labels;
  for (uint32_t i = 0; i < n; ++i) labels += char(i % 10);
  std::string pixels(n * 64, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = char(i * 37);
  vit::write_file_atomic(dir + "/" + prefix + "-images-idx3-ubyte",
                         be32(0x803) + be32(n) + be32(8) + be32(8) + pixels);
  vit::write_file_atomic(dir + "/" + prefix + "-labels-idx1-ubyte", be32(0x801) + be32(n) + labels);
}

// The state keeps the training images' count and the CPU path: other data with as many steps
// (20 images, then 22, at 8 a step) resumed in silence over another permutation, and a resume
// on another path (a requeue on another CPU, VIT_ISA) rounds otherwise without a word.
TEST(RunDir, AResumeOnOtherDataIsRefusedAndOnAnotherPathSaysSo) {
  vit::test::TempDir tmp("run_other_data");
  const std::string data = tmp / "data", dir = tmp / "run", moved = tmp / "moved";
  fs::create_directories(data);
  write_idx(data, "train", 20);
  write_idx(data, "t10k", 4);
  const std::string train =
      "train --model mnist-seed --img-size 8 --patch-size 4 -b 8 --threads 1 --data-dir " + data;
  const Result first = vit::test::run_vit(train + " --epochs 1 --output " + dir, "VIT_ISA=generic");
  ASSERT_EQ(first.code, 0) << first.out;
  fs::copy(dir, moved);
  if (std::string(vit::ops::cpu_isa_detected()) != "generic") {
    const Result other = vit::test::run_vit("train --resume " + moved + " --epochs 2", "env -u VIT_ISA");
    ASSERT_EQ(other.code, 0) << other.out;
    EXPECT_TRUE(has(other.out, std::string("note: the interrupted run computed on the generic path with ") +
                                   vit::ops::cpu_gemm_library() + ", this one on " +
                                   vit::ops::cpu_isa_detected()))
        << other.out;
  }
  const Result same = vit::test::run_vit("train --resume " + dir + " --epochs 2", "VIT_ISA=generic");
  EXPECT_FALSE(has(same.out, "note: the interrupted run computed")) << same.out;
  write_idx(data, "train", 22);
  const Result grown = vit::test::run_vit("train --resume " + dir + " --epochs 3", "VIT_ISA=generic");
  EXPECT_NE(grown.code, 0) << grown.out;
  EXPECT_TRUE(
      has(grown.out, "the run trained on 20 images, this data has 22; an exact resume needs the same data"))
      << grown.out;
}

// An evaluation that fails (a validation image cut short) loses no training: the run stops
// with vit's error and a recovery state at the epoch's last step; once the file is mended,
// --resume evaluates that epoch and goes on, to the uninterrupted run's weights and
// summary.csv (but its seconds), bit for bit, with a model EMA in the state too.
TEST(RunDir, AFailedEvaluationKeepsTheEpochAndTheResumeEvaluatesIt) {
  vit::test::TempDir tmp("run_evalfail");
  const std::string data = tmp / "data";
  auto image = [](int seed) {
    vit::Image img{16, 16, 1, std::vector<uint8_t>(256)};
    for (size_t i = 0; i < img.px.size(); ++i) img.px[i] = uint8_t(i * 7 + seed * 31);
    return img;
  };
  for (const char* split : {"train", "val"})
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 4; ++i) {
        const std::string cls = data + "/" + split + "/c" + std::to_string(c);
        fs::create_directories(cls);
        vit::write_png(cls + "/" + std::to_string(i) + ".png", image(c * 4 + i));
      }
  const std::string bad = data + "/val/c1/3.png";
  const std::vector<char> good = vit::read_file_bytes(bad);
  const std::string train =
      "train --model mnist-seed --img-size 16 --num-classes 2 --epochs 2 -b 4 --threads 1 "
      "--model-ema --recovery-interval 0 --data-dir " +
      data + " --output ";
  ASSERT_EQ(run(train + (tmp / "whole")).code, 0);
  {
    std::ofstream f(bad, std::ios::binary | std::ios::trunc);
    f.write(good.data(), std::streamsize(good.size() / 2));
  }
  const std::string dir = tmp / "run";
  const Result failed = run(train + dir);
  EXPECT_EQ(failed.code, 1) << failed.out;
  EXPECT_TRUE(has(failed.out, "vit: error: " + bad + ": corrupt PNG")) << failed.out;
  EXPECT_TRUE(has(failed.out, "the training of epoch 1 is kept in " + dir +
                                  "/recovery.state.safetensors: mend or remove the file, then --resume " +
                                  dir + " evaluates the epoch and goes on"))
      << failed.out;
  EXPECT_FALSE(fs::exists(dir + "/last.safetensors"));
  const Result again = run("train --resume " + dir);  // not mended yet: the same error, the state kept
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_TRUE(fs::exists(dir + "/recovery.state.safetensors"));
  {
    std::ofstream f(bad, std::ios::binary | std::ios::trunc);
    f.write(good.data(), std::streamsize(good.size()));
  }
  const Result resumed = run("train --resume " + dir);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  for (const char* file : {"last.safetensors", "best.safetensors"})
    vit::test::expect_same_tensors(tmp / "whole/" + file, dir + "/" + file);
  auto without_seconds = [](const std::string& csv) {  // the last column
    std::istringstream in(csv);
    std::string out;
    for (std::string line; std::getline(in, line);) out += line.substr(0, line.rfind(',')) + "\n";
    return out;
  };
  EXPECT_EQ(without_seconds(vit::read_text_file(dir + "/summary.csv")),
            without_seconds(vit::read_text_file(tmp / "whole/summary.csv")));
}

// --resume takes the run directory or its state file; a checkpoint of the run is refused (it
// resumed from the newest state, whatever file was named), and a file outside a run too.
TEST(RunDir, ResumeTakesTheRunOrItsStateNotACheckpoint) {
  vit::test::TempDir tmp("run_resume_file");
  const std::string dir = tmp / "run";
  ASSERT_EQ(run(kTrain + "--epochs 1 --log-every 0 --output " + dir).code, 0);
  const auto before = snapshot(dir);
  const Result best = run("train --resume " + dir + "/best.safetensors --epochs 2");
  EXPECT_EQ(best.code, 1) << best.out;
  EXPECT_TRUE(has(best.out, "--resume " + dir + "/best.safetensors: a checkpoint of the run (weights alone"))
      << best.out;
  EXPECT_TRUE(has(best.out, "--pretrained " + dir + "/best.safetensors starts a new run")) << best.out;
  EXPECT_TRUE(snapshot(dir) == before);
  fs::copy_file(dir + "/best.safetensors", tmp / "loose.safetensors");
  const Result loose = run("train --resume " + (tmp / "loose.safetensors"));
  EXPECT_EQ(loose.code, 1) << loose.out;
  EXPECT_TRUE(has(loose.out, "not a run")) << loose.out;
  const Result state = run("train --resume " + dir + "/" + vit::kStateFile + " --epochs 2");
  EXPECT_EQ(state.code, 0) << state.out;
  EXPECT_TRUE(has(state.out, "epoch 2/2")) << state.out;
}

// A training state given where weights are read is its weights (param.*), as timm reads a
// training checkpoint's state_dict: a run stopped in its first epoch has nothing else. It
// was "tensors of a layer vitcpp does not support" (the moments and the EMA).
TEST(RunDir, ATrainingStateLoadsAsItsWeights) {
  vit::test::TempDir tmp("run_state_weights");
  const std::string dir = tmp / "run";
  ASSERT_EQ(run(kTrain + "--epochs 1 --log-every 0 --model-ema --output " + dir).code, 0);
  const vit::Pretrained state = vit::load_pretrained(dir + "/" + vit::kStateFile);
  const vit::Pretrained last = vit::load_pretrained(dir + "/last.safetensors");
  const size_t n = size_t(last.model->table().total());
  ASSERT_EQ(size_t(state.model->table().total()), n);
  EXPECT_TRUE(
      std::equal(last.model->params().data(), last.model->params().data() + n, state.model->params().data()));
  ASSERT_EQ(state.notes.size(), 1u);
  EXPECT_EQ(state.notes[0],
            "a vit train state: its weights (param.*), not its model EMA (in last_ema.safetensors "
            "after an epoch)");
}

// A run whose args.json no longer describes its model (edited, as timm users edit args.yaml)
// is refused with the tensor, both shapes and the likely cause; nothing changes.
TEST(RunDir, AResumeOfAnotherModelNamesTheTensorAndBothShapes) {
  vit::test::TempDir tmp("run_other_model");
  const std::string dir = tmp / "run";
  ASSERT_EQ(run(kTrain + "--epochs 1 --log-every 0 --output " + dir).code, 0);
  const auto before = snapshot(dir);
  const std::string original = vit::read_text_file(dir + "/args.json");
  const nlohmann::json settings = nlohmann::json::parse(original);
  const std::string cause =
      " (the model args.json describes is not the run's: was " + dir + "/args.json or config.json changed?)";
  for (const auto& [key, value, want] :
       {std::tuple{"embed-dim", 16,
                   "param.patch_embed.proj.weight has shape [8, 1, 4, 4], the model's "
                   "patch_embed.proj.weight [16, 1, 4, 4]"},
        std::tuple{"depth", 3, "no param.blocks.2.norm1.weight for the model's blocks.2.norm1.weight [8]"}}) {
    nlohmann::json edited = settings;
    edited[key] = value;
    vit::write_file_atomic(dir + "/args.json", edited.dump(1) + "\n");
    const Result r = run("train --resume " + dir + " --epochs 2");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(has(r.out, want) && has(r.out, cause)) << key << ": " << r.out;
  }
  vit::write_file_atomic(dir + "/args.json", original);
  EXPECT_TRUE(snapshot(dir) == before) << "a refused --resume changed " << dir;
}

// A resumed run reads its labels as the run did. Class folders renamed since (dog to ant,
// which sorts first and shifts every label) are refused, naming the label that moved, and
// the run's files stay as they were; with the names back it resumes. A state from before
// states kept the class names is checked against last.safetensors' names.
TEST(RunDir, AResumeOnRenamedClassFoldersIsRefused) {
  vit::test::TempDir tmp("run_classes");
  const std::string data = tmp / "data";
  for (const char* split : {"train", "val"})
    for (const char* cls : {"cat", "dog"})
      for (int i = 0; i < 4; ++i) {
        const std::string folder = data + "/" + split + "/" + cls;
        fs::create_directories(folder);
        vit::Image img{16, 16, 1, std::vector<uint8_t>(256, uint8_t(cls[0] + i * 9))};
        vit::write_png(folder + "/" + std::to_string(i) + ".png", img);
      }
  const std::string dir = tmp / "run";
  ASSERT_EQ(run("train --model mnist-seed --img-size 16 --num-classes 2 --epochs 1 -b 4 --threads 1 "
                "--log-every 0 --data-dir " +
                data + " --output " + dir)
                .code,
            0);
  auto rename_dog = [&](const char* to) {
    for (const char* split : {"train", "val"})
      for (const auto& e : fs::directory_iterator(data + "/" + split))
        if (e.path().filename() != "cat") fs::rename(e.path(), e.path().parent_path() / to);
  };
  rename_dog("ant");
  const auto before = snapshot(dir);
  const std::string refused = "--resume " + dir +
                              ": the run trained on 2 classes, the data now has 2; label 0 was 'cat' and is "
                              "now 'ant', so resuming would give the labels other meanings";
  const Result r = run("train --resume " + dir + " --epochs 2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, refused)) << r.out;
  EXPECT_TRUE(snapshot(dir) == before) << "a refused --resume changed " << dir;
  forget_in_state(dir, {"class_names"});  // the state as older runs wrote it
  const Result older = run("train --resume " + dir + " --epochs 2");
  EXPECT_EQ(older.code, 1) << older.out;
  EXPECT_TRUE(has(older.out, refused)) << older.out;
  rename_dog("dog");
  const Result resumed = run("train --resume " + dir + " --epochs 2");
  EXPECT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(has(resumed.out, "epoch 2/2")) << resumed.out;
}

// args.json is the run's settings, {flag: value} (timm's args.yaml is its settings too),
// which --resume reads; the argv list that older runs saved still resumes, to the same bits,
// and a longer --epochs is kept in it in its own form.
TEST(RunDir, ArgsJsonIsTheSettingsAndAnOlderArgvListStillResumes) {
  vit::test::TempDir tmp("run_args");
  const std::string a = tmp / "a", b = tmp / "b";
  const std::string flags = "--epochs 1 --opt sgd --nesterov --opt-betas 0.8 0.99 --log-every 0 --output ";
  ASSERT_EQ(run(kTrain + flags + a).code, 0);
  ASSERT_EQ(run(kTrain + flags + b).code, 0);
  const auto settings = nlohmann::json::parse(vit::read_text_file(a + "/args.json"));
  ASSERT_TRUE(settings.is_object()) << settings.dump();
  EXPECT_EQ(settings.at("model"), "mnist-seed");
  EXPECT_EQ(settings.at("batch-size"), 64);
  EXPECT_EQ(settings.at("epochs"), 1);
  EXPECT_EQ(settings.at("nesterov"), true);
  EXPECT_EQ(settings.at("opt-betas"), nlohmann::json({0.8, 0.99}));
  EXPECT_EQ(settings.at("output"), a);
  EXPECT_EQ(settings.at("seed"), 42);  // not given, kept: args.json alone says how to draw the run again
  // b as an older run saved it: the command line.
  nlohmann::json argv = nlohmann::json::array();
  std::istringstream words(kTrain + flags + b);
  for (std::string w; words >> w;) argv.push_back(w);
  vit::write_file_atomic(b + "/args.json", argv.dump(1) + "\n");
  for (const std::string& dir : {a, b}) {
    const Result longer = run("train --resume " + dir + " --epochs 2");
    ASSERT_EQ(longer.code, 0) << longer.out;
    EXPECT_TRUE(has(longer.out, "resuming " + dir + " after epoch 1")) << longer.out;
  }
  EXPECT_EQ(vit::read_text_file(a + "/last.safetensors"), vit::read_text_file(b + "/last.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(vit::read_text_file(a + "/args.json")).at("epochs"), 2);
  EXPECT_TRUE(has(vit::read_text_file(b + "/args.json"), "\"--epochs\",\n \"2\"\n]"))
      << vit::read_text_file(b + "/args.json");
}

// Runs a and b on to 2 epochs with --resume; whether they end with the same weights.
bool resumed_alike(const std::string& a, const std::string& b) {
  for (const std::string& dir : {a, b}) {
    const Result longer = run("train --resume " + dir + " --epochs 2");
    EXPECT_EQ(longer.code, 0) << longer.out;
    if (longer.code != 0) return false;
  }
  return vit::read_text_file(a + "/last.safetensors") == vit::read_text_file(b + "/last.safetensors");
}

// A run recorded before --FLAG existed (its args.json without it) resumes with `before`, what
// it did then, not the flag's default: it ends with the weights of a run given --FLAG before
// from the start, which differ from the default's.
void expect_an_older_run_resumes_as_before(const std::string& name, const std::string& flags,
                                           const std::string& flag, const std::string& before) {
  vit::test::TempDir tmp(name);
  const std::string given = tmp / "given", now = tmp / "default", old = tmp / "old";
  ASSERT_EQ(run(kTrain + flags + " --" + flag + " " + before + " --output " + given).code, 0);
  ASSERT_EQ(run(kTrain + flags + " --" + flag + " " + before + " --output " + old).code, 0);
  ASSERT_EQ(run(kTrain + flags + " --output " + now).code, 0);
  const std::string weights = "/last.safetensors";
  EXPECT_FALSE(vit::read_text_file(given + weights) == vit::read_text_file(now + weights))
      << "--" << flag << " changes the run";
  nlohmann::json settings = nlohmann::json::parse(vit::read_text_file(old + "/args.json"));
  ASSERT_EQ(settings.erase(flag), 1u) << settings.dump();
  vit::write_file_atomic(old + "/args.json", settings.dump(1) + "\n");
  EXPECT_TRUE(resumed_alike(given, old)) << "the older run resumed with another --" << flag;
}

// --crop-fill came after runs were recorded without it; they padded with the mean (the
// default, black, would change the run).
TEST(RunDir, AnOlderRunWithCropPaddingResumesWithTheMeanFill) {
  expect_an_older_run_resumes_as_before("run_fill", "--crop-pad 2 --log-every 0 --epochs 1", "crop-fill",
                                        "mean");
}

// --aa-fill came when RandAugment's fill changed from 0.5 gray to the mean.
TEST(RunDir, AnOlderRunWithRandAugmentResumesWithTheGrayFill) {
  expect_an_older_run_resumes_as_before("run_aa_fill", "--aa rand-m9-n2 --log-every 0 --epochs 1", "aa-fill",
                                        "gray");
}

// --aa-ops came when RandAugment took timm's ops: older runs drew from vitcpp's mild ones.
TEST(RunDir, AnOlderRunWithRandAugmentResumesWithTheMildOps) {
  expect_an_older_run_resumes_as_before("run_aa_ops", "--aa rand-m9-n2 --log-every 0 --epochs 1", "aa-ops",
                                        "mild");
}

// --aa leaves --color-jitter out, as timm's train.py (since args.json's version 3): such a run
// trains as --aa alone, --force-color-jitter keeps the jitter, and a run recorded before,
// which jittered, resumes jittering.
TEST(RunDir, RandAugmentLeavesTheColorJitterOutAndOlderRunsResumeWithIt) {
  vit::test::TempDir tmp("run_aa_jitter");
  const std::string flags = "--aa rand-m9-n2 --log-every 0 --epochs 1 --output ";
  const std::string alone = tmp / "alone", dropped = tmp / "dropped", forced = tmp / "forced",
                    old = tmp / "old";
  ASSERT_EQ(run(kTrain + flags + alone).code, 0);
  ASSERT_EQ(run(kTrain + flags + dropped + " --color-jitter 0.4").code, 0);
  for (const std::string& dir : {forced, old})
    ASSERT_EQ(run(kTrain + flags + dir + " --color-jitter 0.4 --force-color-jitter").code, 0);
  const std::string weights = "/last.safetensors";
  EXPECT_TRUE(vit::read_text_file(alone + weights) == vit::read_text_file(dropped + weights))
      << "--color-jitter changed a run with --aa";
  EXPECT_FALSE(vit::read_text_file(alone + weights) == vit::read_text_file(forced + weights))
      << "--force-color-jitter changed nothing";
  nlohmann::json settings = nlohmann::json::parse(vit::read_text_file(old + "/args.json"));
  EXPECT_GE(settings.value("args-version", 0), 3) << settings.dump();
  ASSERT_EQ(settings.erase("force-color-jitter"), 1u) << settings.dump();
  settings["args-version"] = 2;
  vit::write_file_atomic(old + "/args.json", settings.dump(1) + "\n");
  EXPECT_TRUE(resumed_alike(forced, old)) << "the older run resumed without its color jitter";
  EXPECT_TRUE(resumed_alike(alone, dropped))
      << "a run of version 3 or later resumed with the jitter --aa leaves out";
}

// --opt sgd is SGD with Nesterov momentum, as timm's (since args.json's version 4): the bits
// of --opt momentum --nesterov, not of --opt momentum (plain momentum SGD); a run recorded
// before, which ran plain momentum, resumes so.
TEST(RunDir, OptSgdIsNesterovAsTimmsAndOlderRunsResumeWithPlainMomentum) {
  vit::test::TempDir tmp("run_opt_sgd");
  const std::string flags = "--log-every 0 --epochs 1 --output ";
  const std::string sgd = tmp / "sgd", nesterov = tmp / "nesterov", plain = tmp / "plain", old = tmp / "old";
  ASSERT_EQ(run(kTrain + flags + sgd + " --opt sgd").code, 0);
  ASSERT_EQ(run(kTrain + flags + nesterov + " --opt momentum --nesterov").code, 0);
  ASSERT_EQ(run(kTrain + flags + plain + " --opt momentum").code, 0);
  ASSERT_EQ(run(kTrain + flags + old + " --opt momentum").code, 0);
  const std::string weights = "/last.safetensors";
  EXPECT_TRUE(vit::read_text_file(sgd + weights) == vit::read_text_file(nesterov + weights));
  EXPECT_FALSE(vit::read_text_file(sgd + weights) == vit::read_text_file(plain + weights));
  nlohmann::json settings = nlohmann::json::parse(vit::read_text_file(old + "/args.json"));
  EXPECT_GE(settings.value("args-version", 0), 4) << settings.dump();
  settings["opt"] = "sgd";
  settings["args-version"] = 3;
  vit::write_file_atomic(old + "/args.json", settings.dump(1) + "\n");
  EXPECT_TRUE(resumed_alike(plain, old)) << "the older run resumed with Nesterov momentum";
  EXPECT_TRUE(resumed_alike(sgd, nesterov));
  const Result zero = run(kTrain + "--synthetic 8 --opt sgd --momentum 0");
  EXPECT_NE(zero.code, 0);
  EXPECT_TRUE(
      has(zero.out, "--opt sgd is SGD with Nesterov momentum (timm's), which needs --momentum above 0"))
      << zero.out;
}

// A run given the fills' defaults resumes with them, not with the older runs' fills: its
// args.json names them, and it ends with the bits of a run given them by name.
TEST(RunDir, ARunWithTheDefaultFillsResumesWithThem) {
  vit::test::TempDir tmp("run_fills");
  const std::string given = tmp / "given", now = tmp / "default";
  const std::string flags = "--aa rand-m9-n2 --crop-pad 2 --log-every 0 --epochs 1 --output ";
  ASSERT_EQ(run(kTrain + flags + now).code, 0);
  ASSERT_EQ(run(kTrain + flags + given + " --aa-fill mean --crop-fill black").code, 0);
  const auto settings = nlohmann::json::parse(vit::read_text_file(now + "/args.json"));
  EXPECT_EQ(settings.value("aa-fill", ""), "mean") << settings.dump();
  EXPECT_EQ(settings.value("aa-ops", ""), "timm") << settings.dump();
  EXPECT_EQ(settings.value("crop-fill", ""), "black") << settings.dump();
  EXPECT_TRUE(resumed_alike(given, now)) << "the run with the default fills resumed with others";
}

// --aa read rand-mM-nN alone before args.json's version 2 (what followed was ignored): such a
// run resumes as it ran. Made here as a run of rand-m9-n2 whose args.json then says what
// its user typed, rand-m9-n2-mstd0.5, without the version.
TEST(RunDir, AnOlderRunResumesItsRandAugmentAsItRan) {
  vit::test::TempDir tmp("run_aa_old");
  const std::string plain = tmp / "plain", old = tmp / "old";
  const std::string flags = "--aa rand-m9-n2 --log-every 0 --epochs 1 --output ";
  ASSERT_EQ(run(kTrain + flags + plain).code, 0);
  ASSERT_EQ(run(kTrain + flags + old).code, 0);
  nlohmann::json settings = nlohmann::json::parse(vit::read_text_file(old + "/args.json"));
  EXPECT_GE(settings.value("args-version", 0), 2) << settings.dump();
  settings.erase("args-version");
  settings["aa"] = "rand-m9-n2-mstd0.5";
  vit::write_file_atomic(old + "/args.json", settings.dump(1) + "\n");
  EXPECT_TRUE(resumed_alike(plain, old)) << "the older run resumed with the options its program ignored";
}

TEST(RunDir, AnEmptyOrMissingOutputIsFineAFileIsNot) {
  vit::test::TempDir tmp("run_new");
  fs::create_directories(tmp / "empty");
  for (const std::string& out : {tmp / "empty", tmp / "new/nested/run/"}) {
    const Result r = run(kTrain + "--epochs 1 --output " + out);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(fs::exists(fs::path(out) / "args.json")) << out;
    EXPECT_TRUE(fs::exists(fs::path(out) / "last.safetensors")) << out;
  }
  // Nothing is left under a temporary name beside the new directory.
  for (const auto& e : fs::directory_iterator(tmp / "new/nested"))
    EXPECT_EQ(e.path().filename(), "run") << e.path();
  vit::write_file_atomic(tmp / "file", "x");
  const Result file = run(kTrain + "--epochs 1 --output " + (tmp / "file"));
  EXPECT_NE(file.code, 0);
  EXPECT_TRUE(has(file.out, "--output " + (tmp / "file") + " is a file; a run needs a directory"))
      << file.out;
  // A directory that cannot be made is named as given, with its folder: it was the temporary
  // name beside it ("/sys/kernel/run.tmp.28189: cannot create (Operation not permitted)"), or
  // the folder alone ("cannot create directories: Not a directory").
  std::vector<std::pair<std::string, std::string>> cannot = {{tmp / "file/run", tmp / "file"}};
  if (fs::is_directory("/sys/kernel")) cannot.emplace_back("/sys/kernel/vitcpp_run", "/sys/kernel");
  for (const auto& [out, folder] : cannot) {
    const Result r = run(kTrain + "--epochs 1 --output " + out);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "--output " + out + ": cannot create the run directory in " + folder + " ("))
        << r.out;
    EXPECT_FALSE(has(r.out, ".tmp")) << r.out;
  }
}

// Integer flags are read in decimal, as Python's int() and timm's argparse read them: CLI11
// read -b 0100 as octal (batch 64, and args.json kept "0100"), 0x10 as 16. A run recorded
// before (args.json version 4) resumes as it ran.
TEST(RunDir, IntegersAreDecimalAndOldRunsResumeAsTheyRan) {
  vit::test::TempDir tmp("run_decimal");
  const std::string padded = tmp / "padded", plain = tmp / "plain";
  const std::string train = "train --model mnist-seed --img-size 16 --synthetic 128 --threads 1 --epochs 1 ";
  const Result r = run(train + "-b 010 --output " + padded);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "batch 10,")) << r.out;
  EXPECT_EQ(nlohmann::json::parse(vit::read_text_file(padded + "/args.json"))["batch-size"], 10);
  const Result hex = run(train + "-b 0x10 --output " + (tmp / "hex"));
  EXPECT_EQ(hex.code, 2) << hex.out;
  EXPECT_TRUE(has(hex.out, "--batch-size: a whole number in decimal, got 0x10")) << hex.out;
  // An old run of -b 010 trained at batch 8: so does its resume.
  ASSERT_EQ(run(train + "-b 8 --output " + plain).code, 0);
  auto args = nlohmann::json::parse(vit::read_text_file(plain + "/args.json"));
  args["batch-size"] = "010";
  args["args-version"] = 4;
  vit::write_file_atomic(plain + "/args.json", args.dump(1));
  const Result resumed = run("train --resume " + plain + " --epochs 2");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(has(resumed.out, "batch 8,")) << resumed.out;
  const std::string fresh = tmp / "fresh";
  ASSERT_EQ(run(train + "-b 8 --output " + fresh).code, 0);
  ASSERT_EQ(run("train --resume " + fresh + " --epochs 2").code, 0);
  vit::test::expect_same_tensors(plain + "/last.safetensors", fresh + "/last.safetensors");
  // Blanks before the digits are no octal either (CLI11's strtoll skipped them: " 010" was 8).
  const Result blank = run(train + "-b ' 010' --output " + (tmp / "blank"));
  EXPECT_TRUE(has(blank.out, "batch 10,")) << blank.out;
  // What the resume records reads the old text as it ran too: "epochs": "010" ran 8, and a
  // resume to 10 was not recorded (it read 10), so the next resume found 8 < the 10 begun.
  args = nlohmann::json::parse(vit::read_text_file(plain + "/args.json"));
  args["epochs"] = "010";
  vit::write_file_atomic(plain + "/args.json", args.dump(1));
  ASSERT_EQ(run("train --resume " + plain + " --epochs 10").code, 0);
  const Result again = run("train --resume " + plain);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(has(again.out, "this run is finished (10 of 10 epochs)")) << again.out;
  // The oldest args.json, the argv list itself, in --flag=VALUE form too.
  const std::string argv = tmp / "argv";
  ASSERT_EQ(run(train + "-b 8 --output " + argv).code, 0);
  vit::write_file_atomic(argv + "/args.json", R"(["train", "--model", "mnist-seed", "--img-size", "16",
      "--synthetic", "128", "--threads", "1", "--epochs=01", "--batch-size=010"])");
  const Result listed = run("train --resume " + argv + " --epochs 2");
  ASSERT_EQ(listed.code, 0) << listed.out;
  EXPECT_TRUE(has(listed.out, "batch 8,")) << listed.out;
}

// --seed is a uint64 as written, a '+' before it taken (Python's int() takes it); -1, 2^64,
// 1e23 and 0x10 are refused (CLI11 read the first three as 2^64 - 1). A run begun before that
// check kept the text typed: its resume takes the seed its state holds, and goes on to the
// same bits as a run of that seed.
TEST(RunDir, SeedsAreTakenAsWrittenAndOldRunsResumeWithTheirOwn) {
  vit::test::TempDir tmp("run_seed");
  for (const char* bad : {"-1", "18446744073709551616", "1e23", "0x10", "5.0"}) {
    const Result r = run(kTrain + "--epochs 1 --seed " + bad + " --output " + (tmp / "bad"));
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    const std::string want = bad == std::string("0x10")
                                 ? "--seed: a whole number in decimal, got 0x10"
                                 : std::string("--seed: a whole number in [0, 2^64 - 1], got ") + bad;
    EXPECT_TRUE(has(r.out, want)) << r.out;
  }
  const std::string plus = tmp / "plus", five = tmp / "five";
  ASSERT_EQ(run(kTrain + "--epochs 1 --seed +5 --output " + plus).code, 0);
  ASSERT_EQ(run(kTrain + "--epochs 1 --seed 5 --output " + five).code, 0);
  vit::test::expect_same_tensors(plus + "/last.safetensors", five + "/last.safetensors");
  // An old run of --seed -1 trained seed 2^64 - 1, and its state says so.
  const std::string old = tmp / "old", now = tmp / "now";
  ASSERT_EQ(run(kTrain + "--epochs 1 --seed 18446744073709551615 --output " + old).code, 0);
  auto args = nlohmann::json::parse(vit::read_text_file(old + "/args.json"));
  args["seed"] = -1;
  vit::write_file_atomic(old + "/args.json", args.dump(1));
  // Nor did it keep its data's size or CPU path: said, as they cannot be checked.
  forget_in_state(old, {"train_size", "isa", "gemm_library"});
  const Result resumed = run("train --resume " + old + " --epochs 2");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(has(resumed.out,
                  "note: this state, from an older vitcpp, does not record its training images' "
                  "count or CPU path"))
      << resumed.out;
  ASSERT_EQ(run(kTrain + "--epochs 1 --seed 18446744073709551615 --output " + now).code, 0);
  ASSERT_EQ(run("train --resume " + now + " --epochs 2").code, 0);
  vit::test::expect_same_tensors(old + "/last.safetensors", now + "/last.safetensors");
}

// --checkpoint RUN_DIR is the run's best.safetensors, --last its last.safetensors (the run's
// best is replaced here by another run's weights, so that the two differ).
TEST(RunDir, ACheckpointRunDirectoryMeansItsBestOrWithLastItsLast) {
  vit::test::TempDir tmp("run_ck");
  const std::string dir = tmp / "run", other = tmp / "other";
  ASSERT_EQ(run(kTrain + "--epochs 1 --output " + dir).code, 0);
  ASSERT_EQ(run(kTrain + "--epochs 1 --seed 7 --output " + other).code, 0);
  fs::copy_file(other + "/last.safetensors", dir + "/best.safetensors", fs::copy_options::overwrite_existing);
  const std::string image = std::string(VIT_FIXTURE_DIR) + "/digit_7.png";
  auto logits = [&](const std::string& checkpoint) {  // "--checkpoint X" and more flags
    const Result r = run("predict --json --logits " + checkpoint + " " + image);
    EXPECT_EQ(r.code, 0) << r.out;
    return r.out;
  };
  const std::string best = logits("--checkpoint " + dir + "/best.safetensors"),
                    last = logits("--checkpoint " + dir + "/last.safetensors");
  ASSERT_NE(best, last);
  EXPECT_EQ(logits("--checkpoint " + dir), best);
  EXPECT_EQ(logits("--checkpoint " + dir + "/"), best);
  EXPECT_EQ(logits("--last --checkpoint " + dir), last);
}

// A run ended by early stopping is finished too: --resume (even with more epochs) says so
// and changes nothing. (lr 1e-9: the eval top-1 of epoch 2 is no better than epoch 1's.)
TEST(RunDir, ResumeOfARunStoppedEarlySaysSoAndChangesNothing) {
  vit::test::TempDir tmp("run_early");
  const std::string dir = tmp / "run";
  const Result first = run(kTrain + "--epochs 5 --patience 1 --lr 1e-9 --output " + dir);
  ASSERT_EQ(first.code, 0) << first.out;
  ASSERT_TRUE(has(first.out, "early stopping")) << first.out;
  const auto before = snapshot(dir);
  for (const char* more : {"", " --epochs 8"}) {
    const Result r = run("train --resume " + dir + more);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(has(r.out, dir + ": this run stopped early after epoch 2 (no better eval top-1 for 1 epoch, "
                                 "--patience 1); nothing to do, no file was changed"))
        << r.out;
    EXPECT_TRUE(snapshot(dir) == before) << "--resume" << more << " changed " << dir;
  }
  EXPECT_TRUE(has(first.out, "early stopping: no better eval top-1 for 1 epoch; vit train --resume " + dir +
                                 " --patience N (0: none) goes on"))
      << first.out;
  // --patience may change on a resume (it changes when the run stops, not its steps): the run
  // goes on to its --epochs, and args.json keeps the new patience for a later resume.
  const Result on = run("train --resume " + dir + " --patience 0");
  ASSERT_EQ(on.code, 0) << on.out;
  EXPECT_TRUE(has(on.out, "epoch 5/5:")) << on.out;
  EXPECT_EQ(nlohmann::json::parse(vit::read_text_file(dir + "/args.json")).at("patience"), 0);
}

// One writer per run directory: a --resume started while the run still goes stops with a
// message before it touches anything; once the run is gone (even killed with SIGKILL) the
// directory is free again.
TEST(RunDir, AResumeWhileTheRunStillGoesIsRefusedUntilItEnds) {
  vit::test::TempDir tmp("run_dir_lock");
  const std::string dir = tmp / "run";
  const pid_t pid = vit::test::spawn(
      VIT_BINARY, kTrain + "--synthetic 4096 -b 16 --epochs 12 --log-every 0 --output " + dir,
      {tmp / "run.log"});
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(dir + "/last.state.safetensors") &&
         std::chrono::steady_clock::now() - start < std::chrono::minutes(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0)
      << "the run ended before the test: " << vit::read_text_file(tmp / "run.log");
  Result second = run("train --resume " + dir);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(vit::test::wait_for(pid, tmp / "run.log").signal, SIGKILL) << "the run was still going";
  EXPECT_EQ(second.code, 1) << second.out;
  EXPECT_NE(second.out.find(
                "vit: error: " + dir +
                " is in use: another vit train is writing it; let it end, or "
                "stop it (Ctrl-C, SIGTERM or SIGHUP: it stops after its step with a state), then --resume " +
                dir + "\n"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(second.out.find("resuming"), std::string::npos) << second.out;
  Result after = run("train --resume " + dir);
  EXPECT_EQ(after.code, 0) << after.out;
  EXPECT_NE(after.out.find("resuming " + dir + " after epoch "), std::string::npos) << after.out;
}

// The lock itself: a second holder in the same process is refused as another process would
// be, and the directory is free once the first is gone.
TEST(RunDir, TheLockAdmitsOneHolderAtATime) {
  vit::test::TempDir tmp("run_dir_lock_unit");
  {
    vit::RunDirLock first(tmp.str());
    EXPECT_THROW(vit::RunDirLock second(tmp.str()), vit::Error);
  }
  EXPECT_NO_THROW(vit::RunDirLock again(tmp.str()));
  try {
    vit::RunDirLock missing(tmp / "missing");
    FAIL() << "expected an error";
  } catch (const vit::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              tmp / "missing" + ": cannot open the run directory: No such file or directory");
  }
}
