// The command line as users type it: --flag=value forms, flags of a variable number of values
// before image files, runs resumed from another directory, text that is not UTF-8, image
// folders whose classes are not the model's, and CLI11's own errors said as vit's.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"
#include "data/image.h"
#include "io/checkpoint.h"
#include "io/pretrained.h"
#include "model/vit.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::Result;
using vit::test::run;
const std::string digit = std::string(VIT_FIXTURE_DIR) + "/digit_7.png";

bool has(const Result& r, const std::string& text) {
  return r.out.find(text) != std::string::npos;
}

// A tiny trained checkpoint (its run directory) in dir/run.
std::string tiny_run(const vit::test::TempDir& tmp) {
  const std::string ck = tmp / "run";
  Result r = run("train --model mnist-seed --synthetic 64 --epochs 1 -b 32 --threads 1 --output " + ck);
  EXPECT_EQ(r.code, 0) << r.out;
  return ck;
}
}  // namespace

// --recipe=NAME was ignored: the run trained the default model with no word.
// Results on stdout that could not be written (a full disk: /dev/full) end in an error and a
// non-zero exit, as coreutils' and Python's do; they ended in 0, the results lost.
TEST(CliArgs, AFailedWriteToStdoutIsAnError) {
  vit::test::TempDir tmp("cli_full");
  vit::save_checkpoint(tmp / "m.safetensors", vit::ViT(vit::preset("mnist-seed")), {});
  for (const std::string& args :
       {std::string("--version"),
        "predict --checkpoint " + (tmp / "m.safetensors") + " --json " + VIT_FIXTURE_DIR + "/digit_7.png",
        // A training's later file operations set errno after its first failed write: the
        // message said "a write failed", not why.
        "train --model mnist-seed --synthetic 64 -b 32 --epochs 1 --threads 1 --output " + (tmp / "run")}) {
    const std::string err = tmp / "err";
    const int status = std::system((std::string(VIT_BINARY) + " " + args + " >/dev/full 2>" + err).c_str());
    EXPECT_EQ(WEXITSTATUS(status), 1) << args;
    EXPECT_NE(vit::read_text_file(err).find("vit: error: writing standard output: No space left on device"),
              std::string::npos)
        << args << ": " << vit::read_text_file(err);
  }
}

// An output in a folder that does not exist is refused before any image is classified (it
// was found only when the results were written, after the whole folder).
TEST(CliArgs, AnOutputsMissingFolderIsRefusedFirst) {
  vit::test::TempDir tmp("cli_nofolder");
  vit::save_checkpoint(tmp / "m.safetensors", vit::ViT(vit::preset("mnist-seed")), {});
  const Result r = vit::test::run("predict --checkpoint " + (tmp / "m.safetensors") + " --results-file " +
                                  (tmp / "none/x.csv") + " " + VIT_FIXTURE_DIR + "/digit_7.png");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--results-file " + (tmp / "none/x.csv") + ": the folder " + (tmp / "none") +
                       " does not exist (create it first)"),
            std::string::npos)
      << r.out;
}

// Past a file-size limit (ulimit -f) a write gives its error, the program not killed by
// SIGXFSZ (exit 153, no message, a temporary file left).
TEST(CliArgs, AFileSizeLimitIsAnErrorNotASignal) {
  vit::test::TempDir tmp("cli_fsize");
  const Result r =
      vit::test::run_vit("train --model mnist-seed --synthetic 64 -b 32 --epochs 1 --threads 1 " +
                             std::string("--log-every 0 --output ") + (tmp / "run"),
                         "ulimit -f 30;");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("write failed (File too large)"), std::string::npos) << r.out;
  for (const auto& e : fs::directory_iterator(tmp / "run"))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

// A normalization that is no number, and a crop that would scale the image past the pixel
// limit, are refused by name (a NaN mean trained and wrote checkpoints none could load; a
// tiny --crop-pct overflowed or asked for terabytes).
TEST(CliArgs, ANonFiniteMeanAndATinyCropAreRefused) {
  vit::test::TempDir tmp("cli_nan");
  Result r = vit::test::run("train --synthetic 8 --epochs 1 --mean nan --output " + (tmp / "r"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("config: mean values must be finite, got nan"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "r/best.safetensors"));
  r = vit::test::run("train --synthetic 8 --epochs 1 --std inf");
  EXPECT_NE(r.out.find("--std must be positive, got inf"), std::string::npos) << r.out;
  vit::save_checkpoint(tmp / "m.safetensors", vit::ViT(vit::preset("mnist-seed")), {});
  for (const char* pct : {"0.0001", "1e-300"}) {
    r = vit::test::run("predict --checkpoint " + (tmp / "m.safetensors") + " --crop-pct " + pct + " " +
                       VIT_FIXTURE_DIR + "/digit_7.png");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("past the 178956970-pixel limit (VIT_MAX_IMAGE_PIXELS)"), std::string::npos)
        << r.out;
  }
}

// A run that fails with a state to go on from says how to go on (a full disk at an epoch's
// end said only which file it could not write).
TEST(CliArgs, AFailedRunWithAStateSaysHowToResume) {
  vit::test::TempDir tmp("cli_hint");
  const std::string dir = tmp / "run";
  ASSERT_EQ(
      vit::test::run("train --model mnist-seed --synthetic 64 -b 32 --epochs 1 --threads 1 --log-every 0 "
                     "--output " +
                     dir)
          .code,
      0);
  // Room for args.json (a few KB), not for the next epoch's weights.
  const Result r = vit::test::run_vit("train --resume " + dir + " --epochs 2", "ulimit -f 6;");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("File too large"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("once mended, the run continues from its last state: vit train --resume " + dir),
            std::string::npos)
      << r.out;
}

TEST(CliArgs, RecipeWithAnEqualsSignIsTheRecipe) {
  vit::test::TempDir tmp("args_recipe");
  const std::string dir = tmp / "run";
  Result r =
      run("train --recipe=cifar-seed --img-size 8 --patch-size 4 --depth 1 --synthetic 16 --epochs 1 "
          "--threads 1 --output " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto args = nlohmann::json::parse(vit::read_text_file(dir + "/args.json"));
  EXPECT_EQ(args.value("model", ""), "cifar-seed") << args.dump();
  EXPECT_EQ(args.value("patience", 0), 10) << args.dump();
}

// A run started with a relative --data-dir resumes from any directory (args.json keeps the
// absolute path), and --resume takes --epochs=N and --threads=N as it takes --epochs N.
TEST(CliArgs, ARunResumesFromAnotherDirectoryWithFlagsGivenWithEquals) {
  vit::test::TempDir tmp("args_resume");
  fs::create_directories(tmp / "data");
  // An IDX dataset of 32 8x8 images, relative to the directory the run starts in.
  auto be32 = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  for (const char* split : {"train", "t10k"}) {
    std::string px(32 * 64, '\0'), labels(32, '\0');
    for (size_t i = 0; i < px.size(); ++i) px[i] = char((i * 37) % 251);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = char(i % 10);
    vit::write_file_atomic(tmp / ("data/" + std::string(split) + "-images-idx3-ubyte"),
                           be32(0x803) + be32(32) + be32(8) + be32(8) + px);
    vit::write_file_atomic(tmp / ("data/" + std::string(split) + "-labels-idx1-ubyte"),
                           be32(0x801) + be32(32) + labels);
  }
  Result r = vit::test::run_vit(
      "train --model mnist-seed --img-size 8 --data-dir data --epochs 1 -b 16 --threads 1 "
      "--output run",
      "cd " + tmp.str() + " &&");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto args = nlohmann::json::parse(vit::read_text_file(tmp / "run/args.json"));
  EXPECT_EQ(args.value("data-dir", ""), (fs::path(tmp.str()) / "data").string()) << args.dump();
  r = vit::test::run_vit("train --resume " + (tmp / "run") + " --epochs=2 --threads=1", "cd / &&");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "epoch 2/2: train loss")) << r.out;
  // A run of before keeps the path as typed: said so, not "--data-dir data: not a directory".
  auto old = args;
  old["data-dir"] = "data";
  vit::write_file_atomic(tmp / "run/args.json", old.dump(1));
  r = vit::test::run_vit("train --resume " + (tmp / "run") + " --epochs 3", "cd / &&");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r,
                  "args.json gives --data-dir data, which does not exist from here (a relative path: "
                  "resume from the directory the run started in)"))
      << r.out;
}

// A run resumes with the model it began with: --config FILE was read again by its relative
// path (from another directory: "cannot open"), and an edited FILE trained its new values.
// And a --data-dir through a link and ".." is kept as the kernel resolves it (args.json's
// lexically normal path named another folder, whose data a resume then read).
TEST(CliArgs, AResumedRunKeepsItsConfigAndItsDataThroughLinks) {
  vit::test::TempDir tmp("args_resume_cfg");
  fs::create_directories(tmp / "deep/a/x");
  const std::string data = tmp / "deep/a/data";
  fs::create_directories(data);
  for (const char* split : {"train", "val"})
    for (const char* cls : {"0", "1"}) {
      const std::string folder = data + "/" + split + "/" + cls;
      fs::create_directories(folder);
      fs::copy_file(digit, folder + "/a.png");
    }
  fs::create_directory_symlink("deep/a/x", tmp / "lnk");
  fs::create_directories(tmp / "data");  // what "lnk/../data" is as text: not a dataset
  vit::write_file_atomic(tmp / "cfg.json", vit::preset("mnist-seed").to_json());
  Result r = vit::test::run_vit(
      "train --config cfg.json --data-dir lnk/../data --epochs 1 -b 2 --threads 1 --output run",
      "cd " + tmp.str() + " &&");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto args = nlohmann::json::parse(vit::read_text_file(tmp / "run/args.json"));
  EXPECT_TRUE(fs::equivalent(args.value("data-dir", ""), data)) << args.dump();
  vit::ViTConfig edited = vit::preset("mnist-seed");
  edited.drop_rate = 0.3f;
  vit::write_file_atomic(tmp / "cfg.json", edited.to_json());
  r = vit::test::run_vit("train --resume " + (tmp / "run") + " --epochs 2 --threads 1", "cd / &&");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "epoch 2/2: train loss")) << r.out;
  EXPECT_FALSE(has(r, "dropout")) << r.out;
}

// A fine-tune with a state resumes without its --pretrained file (deleted, or a run moved to
// another machine): the state holds every weight and config.json the model. It was refused
// ("which does not exist from here"). Without a state the file is still needed.
TEST(CliArgs, AFineTuneResumesWithoutItsPretrainedFile) {
  vit::test::TempDir tmp("args_resume_pre");
  const std::string ck = tiny_run(tmp);
  fs::copy_file(ck + "/best.safetensors", tmp / "pre.safetensors");
  const std::string flags = " --synthetic 64 -b 32 --threads 1 --output " + (tmp / "ft");
  Result r = run("train --pretrained " + (tmp / "pre.safetensors") + " --epochs 1" + flags);
  ASSERT_EQ(r.code, 0) << r.out;
  fs::rename(tmp / "ft", tmp / "moved");
  fs::remove(tmp / "pre.safetensors");
  r = run("train --resume " + (tmp / "moved") + " --epochs 2 --threads 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "epoch 2/2: train loss")) << r.out;
  EXPECT_FALSE(has(r, "loading the pretrained weights")) << r.out;
  fs::remove(tmp / "moved/last.state.safetensors");
  r = run("train --resume " + (tmp / "moved") + " --epochs 3 --threads 1");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "pre.safetensors, which does not exist from here")) << r.out;
}

// A --model beside --pretrained names the model the file is, and a resume that reads the file
// again (no state yet) reads it as that model; a run of args.json before version 6 recorded a
// recipe's --model there, unused, and resumes without it.
TEST(CliArgs, AFineTunesModelNameComesBackAtResumeButNotAnOlderRunsRecipeModel) {
  vit::test::TempDir tmp("args_resume_named");
  const std::string ck = tiny_run(tmp);
  fs::copy_file(ck + "/best.safetensors", tmp / "pre.safetensors");
  const std::string ft = tmp / "ft";
  Result r = run("train --pretrained " + (tmp / "pre.safetensors") +
                 " --epochs 1 --synthetic 64 -b 32 --threads 1 " + "--output " + ft);
  ASSERT_EQ(r.code, 0) << r.out;
  auto args = nlohmann::json::parse(vit::read_text_file(ft + "/args.json"));
  EXPECT_EQ(args.value("args-version", 0), 6) << args.dump();
  args["model"] = "vit-base-16";
  for (const int version : {5, 6}) {
    args["args-version"] = version;
    vit::write_file_atomic(ft + "/args.json", args.dump(1));
    fs::remove(ft + "/last.state.safetensors");  // it starts again, from the --pretrained file
    r = run("train --resume " + ft + " --threads 1");
    if (version == 5) {
      EXPECT_EQ(r.code, 0) << r.out;
      EXPECT_TRUE(has(r, "loading the pretrained weights from " + (tmp / "pre.safetensors") + "\n")) << r.out;
    } else {
      EXPECT_NE(r.code, 0) << r.out;
      EXPECT_TRUE(has(r, "pre.safetensors is not a vit-base-16: it holds a ViT of embed_dim")) << r.out;
    }
  }
}

// A training run's own files are not an output's: `vit average -o RUN/best.safetensors` and
// `vit quantize --out RUN/last.safetensors` replaced them without a word. Commands a message
// suggests are quoted for the shell (a run "my run" gave `--resume .../my run`).
TEST(CliArgs, ARunsOwnFilesAreNotOutputsAndSuggestionsAreQuoted) {
  vit::test::TempDir tmp("args_run_files");
  const std::string ck = tiny_run(tmp);
  const std::string last = vit::read_text_file(ck + "/last.safetensors");
  Result r = run("average " + ck + " -o " + ck + "/last.safetensors");  // the run's best is averaged
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "last.safetensors: one of the files of the training run in " + ck)) << r.out;
  r = run("quantize --checkpoint " + ck + "/best.safetensors --out " + ck + "/last.safetensors");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "last.safetensors: one of the files of the training run in " + ck)) << r.out;
  EXPECT_EQ(vit::read_text_file(ck + "/last.safetensors"), last);
  // Those it has yet to write too: a checkpoint-3.safetensors of another model was averaged
  // with the run's by `vit average RUN`, then deleted by its --resume.
  for (const char* cmd : {"average ", "quantize --checkpoint "}) {
    r = run(cmd + ck + (cmd[0] == 'a' ? " -o " : " --out ") + ck + "/checkpoint-3.safetensors");
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_TRUE(has(r, "checkpoint-3.safetensors: a name the training run in " + ck +
                           " writes its files under (and prunes): choose another name"))
        << r.out;
    EXPECT_FALSE(fs::exists(ck + "/checkpoint-3.safetensors"));
  }
  r = run("average " + ck + " -o " + ck + "/averaged.safetensors");
  EXPECT_EQ(r.code, 0) << r.out;
  const std::string spaced = tmp / "my run";
  r = run("train --model mnist-seed --synthetic 64 --epochs 1 -b 32 --threads 1 --output '" + spaced + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train --model mnist-seed --synthetic 64 --epochs 1 -b 32 --threads 1 --output '" + spaced + "'");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "continue it with --resume '" + spaced + "' or choose another --output")) << r.out;
  // A --resume of a directory that is not there says so, whatever else is given.
  r = run("train --resume " + (tmp / "nope") + " --data-dir " + (tmp / "nope"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "--resume " + (tmp / "nope") + ": no such directory")) << r.out;
}

// `vit train | tee log` stopped by Ctrl-C or a scheduler's SIGTERM: the signal ends tee too, and
// the run's stop lines went into the closed pipe, so SIGPIPE ended it (141) where it should
// end as the signal asks (143: a job script requeues on it), its state written.
TEST(CliArgs, AStopSignalEndsTheRunAsAskedWhenItsPipeIsGone) {
  vit::test::TempDir tmp("args_sigpipe");
  // The run's first three lines go to head, which then ends (as tee at the Ctrl-C); the run
  // prints nothing more until it is stopped (--progress none, no recovery state for 5 min).
  // The signal comes once the training began (config.json written, the third line printed).
  const std::string script =
      "( { " + std::string(VIT_BINARY) +
      " train --model mnist-seed --synthetic 200000 -b 32 --epochs 1 --threads 1 --progress none --output " +
      (tmp / "run") + " 2>" + (tmp / "err") + " & echo $! > " + (tmp / "pid") + "; wait $!; echo $? > " +
      (tmp / "code") + "; } | head -n 3 > /dev/null ) & while [ ! -s " + (tmp / "pid") +
      " ]; do sleep 0.05; done; while [ ! -e " + (tmp / "run/config.json") +
      " ]; do sleep 0.05; done; sleep 0.5; kill -TERM $(cat " + (tmp / "pid") + "); while [ ! -s " +
      (tmp / "code") + " ]; do sleep 0.05; done";
  ASSERT_EQ(std::system(("timeout 120 sh -c '" + script + "'").c_str()), 0);
  EXPECT_EQ(vit::read_text_file(tmp / "code"), "143\n") << vit::read_text_file(tmp / "err");
  EXPECT_TRUE(fs::exists(tmp / "run/last.state.safetensors") ||
              fs::exists(tmp / "run/recovery.state.safetensors"));
}

// Flags that change nothing in the run are said (they were taken in silence).
TEST(CliArgs, PredictAndEvalSayWhichFlagsHaveNoEffect) {
  vit::test::TempDir tmp("args_moot");
  const std::string ck = tiny_run(tmp);
  Result r = run("predict --checkpoint " + ck + " --logits --results-format json " + digit);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "vit predict: note: --logits: no effect without --json")) << r.out;
  EXPECT_TRUE(has(r, "vit predict: note: --results-format: no effect without --results-file")) << r.out;
  r = run("predict --checkpoint " + ck + " --logits --json " + digit);
  EXPECT_FALSE(has(r, "note:")) << r.out;
  // --num-heads is for a file that does not say; this one does (it was ignored in silence).
  r = run("predict --checkpoint " + ck + " --num-heads 3 " + digit);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "num_heads 3 not used: the checkpoint's config or architecture gives 2 heads")) << r.out;
  r = run("predict --checkpoint " + ck + " --num-heads 2 " + digit);
  EXPECT_FALSE(has(r, "num_heads")) << r.out;
}

// A folder's file that does not decode stops vit predict, with the flag that leaves such files
// out, as train and eval have (predict had none: one bad file of thousands ended the run).
TEST(CliArgs, PredictSkipsBadImagesWhenAsked) {
  vit::test::TempDir tmp("args_predict_bad");
  const std::string ck = tiny_run(tmp);
  fs::create_directories(tmp / "images");
  fs::copy_file(digit, tmp / "images/a.png");
  vit::write_file_atomic(tmp / "images/b.png", "not a png");
  fs::copy_file(digit, tmp / "images/c.png");
  Result r = run("predict --checkpoint " + ck + " " + (tmp / "images"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "b.png: not a PNG or JPEG file (--skip-bad-images leaves such files out)")) << r.out;
  r = run("predict --checkpoint " + ck + " --skip-bad-images --json --results-file " + (tmp / "r.csv") + " " +
          (tmp / "images"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "vit predict: skipped " + (tmp / "images/b.png") + ": not a PNG or JPEG file")) << r.out;
  EXPECT_TRUE(has(r, "vit predict: 1 of 3 image(s) skipped")) << r.out;
  EXPECT_TRUE(has(r, "a.png")) << r.out;
  EXPECT_TRUE(has(r, "c.png")) << r.out;
  const std::string csv = vit::read_text_file(tmp / "r.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;  // the header and two images
  EXPECT_EQ(csv.find("b.png"), std::string::npos) << csv;
}

// Two outputs spelled apart ("z.csv", "./z.csv") are one file: refused before the run (the
// second write replaced the first, the predictions lost).
TEST(CliArgs, OneOutputFileSpelledTwoWaysIsRefused) {
  vit::test::TempDir tmp("args_same_out");
  const std::string ck = tiny_run(tmp);
  fs::create_directories(tmp / "images");
  fs::copy_file(digit, tmp / "images/a.png");
  const Result r =
      vit::test::run_vit("predict --checkpoint " + ck + " --results-file z.csv -o ./z.csv --features images",
                         "cd " + tmp.str() + " &&");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "each output needs a file of its own")) << r.out;
  EXPECT_FALSE(fs::exists(tmp / "z.csv"));
}

// "-" is a standard stream, as Unix tools take it: an image read from stdin, results written
// to stdout alone (the other lines to stderr). Before, "-" was a file of that name: an image
// that did not open, a results file named "-".
TEST(CliArgs, ADashIsStandardInputOrOutput) {
  vit::test::TempDir tmp("args_dash");
  const std::string ck = tiny_run(tmp);
  const std::string csv = tmp / "stdout.csv";
  const Result r =
      vit::test::run_vit("predict --checkpoint " + ck + " --topk 1 - --results-file - | cat > " + csv,
                         "cd " + tmp.str() + " && cat " + digit + " |");
  EXPECT_EQ(r.code, 0) << r.out;  // cat's: the pipe's stdout holds the results alone
  const std::string out = vit::read_text_file(csv);
  EXPECT_EQ(out.rfind("filename,index_0,label_0,prob_0\nstdin,", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
  EXPECT_FALSE(fs::exists(tmp / "-"));
  const Result two =
      run("eval --checkpoint " + ck + " --data-dir " + tmp.str() + " --results-file - --predictions -");
  EXPECT_EQ(two.code, 2) << two.out;
  EXPECT_TRUE(has(two, "--results-file and --predictions both write standard output")) << two.out;
  // An ONNX export to standard output is the model's bytes alone: its "wrote" line went after
  // them, and "-" was a file of that name.
  const std::string piped = tmp / "piped.onnx", file = tmp / "file.onnx", err = tmp / "err.txt";
  for (const std::string out : {"-", "/dev/stdout"}) {
    const Result onnx = vit::test::run_vit(
        "export --format onnx --checkpoint " + ck + " --out " + out + " 2>" + err + " | cat > " + piped,
        "cd " + tmp.str() + " &&");
    EXPECT_EQ(onnx.code, 0) << onnx.out;
    EXPECT_TRUE(vit::read_text_file(err).starts_with("wrote /dev/stdout (")) << vit::read_text_file(err);
    ASSERT_EQ(run("export --format onnx --checkpoint " + ck + " --out " + file).code, 0);
    EXPECT_EQ(vit::read_text_file(piped), vit::read_text_file(file)) << out;
    EXPECT_FALSE(fs::exists(tmp / "-"));
  }
}

// OMP_THREAD_LIMIT and OMP_DYNAMIC=true gave parallel regions fewer threads than asked, and the
// kernels that split their work by the count asked left parts of it undone: ViT-Ti/16's logits
// under OMP_THREAD_LIMIT=1 with --threads 2 had nothing to do with the image's (ViT-B's too).
// The count is held to the limit, said, and the logits are --threads 1's.
TEST(CliArgs, OpenMPsThreadLimitHoldsTheCountAndLosesNoWork) {
  vit::test::TempDir tmp("args_omp_limit");
  vit::ViT m(vit::named_config("vit_tiny_patch16_224"));
  m.init_weights(3);
  const std::string ck = tmp / "tiny.safetensors";
  vit::save_checkpoint(ck, m);
  const std::string predict = "predict --logits --json --checkpoint " + ck + " " + digit;
  const Result one = run(predict + " --threads 1");
  ASSERT_EQ(one.code, 0) << one.out;
  const Result limited = vit::test::run_vit(predict + " --threads 2", "OMP_THREAD_LIMIT=1");
  ASSERT_EQ(limited.code, 0) << limited.out;
  EXPECT_TRUE(has(limited, "vit: note: --threads 2: OMP_THREAD_LIMIT=1 holds it to 1")) << limited.out;
  EXPECT_EQ(vit::test::last_line(limited.out), vit::test::last_line(one.out));
  // vit serve holds its passes to the limit too, and now says so (a missing model ends it here).
  const Result serve = vit::test::run_vit("serve --threads 2 --port 0 -m m=" + (tmp / "none.safetensors"),
                                          "OMP_THREAD_LIMIT=1");
  EXPECT_TRUE(has(serve, "vit: note: --threads 2: OMP_THREAD_LIMIT=1 holds it to 1")) << serve.out;
}

// OMP_NUM_THREADS that libgomp refuses: its warning once (vit runs itself again, and libgomp
// said it in both), and the run goes on with every core, as libgomp's does; one it takes
// (spaces and '+' too) still holds.
TEST(CliArgs, AnInvalidOmpNumThreadsIsSaidOnce) {
  vit::test::TempDir tmp("args_omp_num");
  const std::string ck = tiny_run(tmp);
  const std::string predict = "predict --checkpoint " + ck + " --logits --json " + digit;
  const Result plain = run(predict);
  ASSERT_EQ(plain.code, 0) << plain.out;
  for (const std::string value : {"0", "5x", "4,", "-1", "", "9223372036854775808"}) {
    const Result r = vit::test::run_vit(predict, "OMP_NUM_THREADS='" + value + "'");
    EXPECT_EQ(r.code, 0) << r.out;
    size_t said = 0;
    for (size_t at = r.out.find("Invalid value"); at != std::string::npos;
         at = r.out.find("Invalid value", at + 1))
      ++said;
    EXPECT_EQ(said, 1u) << value << ": " << r.out;
    EXPECT_EQ(vit::test::last_line(r.out), vit::test::last_line(plain.out)) << value;
  }
  const Result one = vit::test::run_vit("info --checkpoint " + ck, "OMP_NUM_THREADS=' +1 ,2'");
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_FALSE(has(one, "Invalid value")) << one.out;
  EXPECT_TRUE(has(one, "OMP_NUM_THREADS= +1 ,2 ")) << "kept for the second run: " << one.out;
}

// --img-size (S or H W) and --features [pooled|tokens] took the image after them as a value.
TEST(CliArgs, FlagsOfOptionalValuesLeaveTheImagesAfterThem) {
  vit::test::TempDir tmp("args_images");
  const std::string ck = tiny_run(tmp);
  Result before = run("predict --checkpoint " + ck + " --topk 1 " + digit + " --img-size 56");
  ASSERT_EQ(before.code, 0) << before.out;
  for (const std::string flags : {"--img-size 56", "--img-size=56", "--img-size 56 56"}) {
    Result r = run("predict --checkpoint " + ck + " --topk 1 " + flags + " " + digit);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.out;
    EXPECT_EQ(r.out, before.out) << flags;
  }
  fs::create_directories(tmp / "images");
  fs::copy_file(digit, tmp / "images/a.png");
  Result r = run("predict --checkpoint " + ck + " -o " + (tmp / "f.npy") + " --features " + (tmp / "images"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "wrote pooled features [1, 8] of 1 images")) << r.out;
  // A misspelt mode is refused as one; it was read as an image ("token: cannot open").
  r = run("predict --checkpoint " + ck + " -o " + (tmp / "f.npy") + " --features token " + digit);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "--features: pooled or tokens, got 'token'")) << r.out;
  // Flags that say nothing to embeddings are said to do nothing (they were taken in silence).
  r = run("predict --checkpoint " + ck + " -o " + (tmp / "f.npy") + " --features --topk 3 " + digit);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "vit predict: note: --topk: no effect with --features")) << r.out;
  // An image and --tensor both: which to predict is not a guess to make.
  r = run("predict --checkpoint " + ck + " --tensor " + (tmp / "x.safetensors:x") + " " + digit);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "give image files or --tensor FILE:NAME, not both")) << r.out;
}

// nlohmann's "[json.exception.type_error.316] invalid UTF-8 byte" named no file.
TEST(CliArgs, TextThatIsNotUtf8IsNamedOrShownReplaced) {
  vit::test::TempDir tmp("args_utf8");
  const std::string ck = tiny_run(tmp);
  const std::string latin1 = tmp / "caf\xe9.png";
  fs::copy_file(digit, latin1);
  Result r = run("predict --checkpoint " + ck + " --json '" + latin1 + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "caf\xef\xbf\xbd.png")) << r.out;  // U+FFFD in the JSON line
  std::ofstream(tmp / "labels.txt") << "0\n1\n2\n3\n4\n5\n6\n7\n8\nn\xe9uf\n";
  r = run("predict --checkpoint " + ck + " --labels " + (tmp / "labels.txt") + " " + digit);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "labels.txt: line 10 is not UTF-8 text")) << r.out;
  r = run("train --model mnist-seed --synthetic 16 --epochs 1 --threads 1 --output '" +
          (tmp / "r\xe9sum\xe9") + "'");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "--output: a value that is not UTF-8 text cannot be kept in the run's args.json"))
      << r.out;
  EXPECT_FALSE(fs::exists(tmp / "r\xe9sum\xe9"));
}

// A folder scored against classes the model does not name read as 0% with no word.
TEST(CliArgs, EvalSaysWhenAFoldersClassesAreNotTheModels) {
  vit::test::TempDir tmp("args_folder");
  const std::string ck = tiny_run(tmp);
  for (const char* c : {"val/2", "val/7"}) {
    fs::create_directories(tmp / c);
    fs::copy_file(digit, tmp / (std::string(c) + "/a.png"));
  }
  Result r = run("eval --checkpoint " + ck + " --data-dir " + tmp.str() + " --threads 1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r,
                  "2 class folders for a model of 10 classes without class names: the folders are "
                  "classes 0, 1, ... in sorted order (2 -> 0, 7 -> 1)"))
      << r.out;
  std::ofstream(tmp / "names.txt") << "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n";
  r = run("export --checkpoint " + ck + " --labels " + (tmp / "names.txt") + " --out " + (tmp / "named"));
  ASSERT_EQ(r.code, 0) << r.out;
  fs::rename(tmp / "val/2", tmp / "val/zebra");
  fs::rename(tmp / "val/7", tmp / "val/seven");
  r = run("eval --checkpoint " + (tmp / "named") + " --data-dir " + tmp.str() + " --threads 1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "1 class folder(s) the model's 10 class names do not include (zebra)")) << r.out;
  // Its --predictions name the labels by the folders and the predictions by the model (a
  // prediction was named by the folder of the same number: "seven" or "zebra" for "zero").
  r = run("eval --checkpoint " + (tmp / "named") + " --data-dir " + tmp.str() +
          " --threads 1 --predictions " + (tmp / "p0.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string names = ",zero,one,two,three,four,five,six,seven,eight,nine,";
  std::istringstream rows(vit::read_text_file(tmp / "p0.csv"));
  std::string row;
  std::getline(rows, row);  // the header
  while (std::getline(rows, row)) {
    std::vector<std::string> f;
    std::istringstream cells(row);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    ASSERT_EQ(f.size(), 6u) << row;
    EXPECT_TRUE(f[3] == "seven" || f[3] == "zebra") << row;
    EXPECT_NE(names.find("," + f[4] + ","), std::string::npos)
        << "a prediction not named by the model: " << row;
  }
  // Folders of the model's names: its indices, its names per class ("n/a" without images),
  // and --predictions with the names and each image's file.
  fs::rename(tmp / "val/zebra", tmp / "val/two");
  r = run("eval --checkpoint " + (tmp / "named") + " --data-dir " + tmp.str() +
          " --threads 1 --predictions " + (tmp / "p.csv"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "zero: n/a")) << r.out;
  // A class's accuracy with one decimal (it printed 1e+02% and 7e+01%: one significant digit).
  EXPECT_TRUE(std::regex_search(r.out, std::regex("seven: (0|100)\\.0%"))) << r.out;
  const std::string csv = vit::read_text_file(tmp / "p.csv");
  EXPECT_EQ(csv.rfind("index,label,prediction,label_name,prediction_name,file\n0,7,", 0), 0u) << csv;
  EXPECT_NE(csv.find(",two,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("val/seven/a.png\n"), std::string::npos) << csv;
}

// CLI11's errors exited 104-109 without vit's "vit: error:"; now as argparse: status 2.
TEST(CliArgs, CommandLineErrorsExitWithStatusTwoAndSaySo) {
  for (const std::string args : {"train --bogus", "train --epochs many", "eval", "predict --topk"}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("vit: error: ", 0), 0u) << args << ": " << r.out;
  }
  // Arguments not expected, in the order given (CLI11 listed them last first: "1 --threads").
  const Result extras = run("info --threads 1");
  EXPECT_TRUE(has(extras, "vit: error: The following arguments were not expected: --threads 1\n"))
      << extras.out;
  // Flags that cannot work, found after parsing: status 2 too, with the pointer to --help (they
  // exited 1, as a bad file does).
  for (const std::string args :
       {"train --recipe nope --synthetic 8", "predict --topk 0 x.png", "predict --checkpoint x.safetensors",
        "predict --features --checkpoint x.safetensors x.png", "train --opt-betas 0.9 --synthetic 8",
        "export --checkpoint x.safetensors --format onnx --out ''"}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("vit: error: ", 0), 0u) << args << ": " << r.out;
  }
  EXPECT_TRUE(has(run("predict --topk 0 x.png"), "run 'vit predict --help' for the options")) << "";
  // --output=~/x made a folder named "~" (the shell expands ~ only at a word's start).
  const Result home = run("train --synthetic 8 --epochs 1 --output=~/vitcpp_never_made");
  EXPECT_EQ(home.code, 2) << home.out;
  EXPECT_TRUE(has(home, "write --output ~/vitcpp_never_made (or $HOME/vitcpp_never_made)")) << home.out;
  EXPECT_FALSE(fs::exists("~/vitcpp_never_made"));
  // A poll without a pause kept a third of a core busy (1e-9 was taken).
  const Result poll =
      run("serve --model-control-mode poll --repository-poll-secs 0.01 --model m=x.safetensors");
  EXPECT_EQ(poll.code, 2) << poll.out;
  EXPECT_TRUE(has(poll, "--repository-poll-secs: 0.1 or more, got 0.01")) << poll.out;
  EXPECT_EQ(run("train --help").code, 0);
  EXPECT_EQ(run("--version").code, 0);
}

// Flags given that change nothing in the run get a note each (they were taken without a
// word: --freeze-backbone without --pretrained trained a head on a random backbone); the
// recipes, as given, get none.
TEST(CliArgs, FlagsWithoutEffectGetANote) {
  const std::string train = "train --synthetic 16 --epochs 1 -b 8 --threads 1 ";
  const std::pair<std::string, std::string> cases[] = {
      {"--freeze-backbone", "note: --freeze-backbone: the head trains on a randomly initialized backbone"},
      {"--opt adamw --momentum 0.8 --nesterov",
       "note: --momentum, --nesterov: no effect, SGD's and --opt is adamw"},
      {"--opt sgd --opt-betas 0.8 0.9",
       "note: --opt-betas: no effect, Adam's, AdamW's and Lamb's and --opt is sgd"},
      {"--model-ema-decay 0.9", "note: --model-ema-decay: no effect, the model EMA is off"},
      {"--mixup-prob 0.5", "note: --mixup-prob: no effect, mixup and CutMix are off"},
      {"--mixup-mode elem --mixup-off-epoch 3",
       "note: --mixup-mode, --mixup-off-epoch: no effect, mixup and CutMix are off"},
      {"--bce-sum --bce-pos-weight 2",
       "note: --bce-pos-weight, --bce-sum: no effect, the binary cross-entropy's and --bce-loss is not "
       "given"},
      {"--clip-mode agc", "note: --clip-mode: no effect, clipping is off (--clip-grad)"},
      {"--lr 0.01 --lr-base 0.1", "note: --lr-base: no effect, --lr is given and sets the lr (timm's)"},
      {"--lr-base-scale sqrt", "note: --lr-base-scale: no effect without --lr-base"},
      {"--cutmix 0.5 --cutmix-minmax 0.2 0.8 -b 8",
       "note: --cutmix: no effect with --cutmix-minmax, which draws CutMix's boxes with alpha 1 (timm's)"},
      {"--opt lamb", "note: --opt lamb with --weight-decay 0: no tensor gets a trust ratio"},
      {"--opt lambc", "note: --opt lambc with --weight-decay 0: no tensor gets a trust ratio"},
      {"--opt lion --opt-eps 1e-6", "note: --opt-eps: no effect, Lion has no epsilon"},
      // Found by a tester's sweep: each changed what trained without a word.
      {"--val-split 0.5", "note: --val-split: no effect, --synthetic makes its own evaluation samples"},
      {"--std 5", "note: --std: no effect on --synthetic's samples (made as the model's input)"},
      {"--mixup 0.8 -b 3",
       "note: -b 3 with --mixup or --cutmix: each batch's middle sample is mixed with itself"},
      {"--cutmix 1 -b 1", "note: -b 1 with --mixup or --cutmix: a batch of 1 is mixed with itself"},
      {"--warmup-epochs 1",
       "note: --warmup-epochs 1 is not shorter than --epochs 1: the lr never reaches --lr"},
      {"--aa-fill gray", "note: --aa-fill: no effect, RandAugment is off"},
      {"--crop-pad 0 --crop-fill mean", "note: --crop-fill: no effect, the padded crop is off"},
      {"--decay-rate 0.5",
       "note: --decay-rate: no effect, the step and multistep schedules' and --sched is cosine"},
      {"--sched step --decay-milestones 2", "note: --decay-milestones: no effect, the multistep schedule's"},
      {"--pos-resample hf", "note: --pos-resample: no effect"},
      // A floor above --lr is nothing to the step schedule either (it was refused, "min lr must be
      // in [0, lr]", beside this note's "no effect").
      {"--sched step --min-lr 0.1",
       "note: --min-lr: no effect, the cosine schedule's floor and --sched is step"},
      {"--sched step --min-lr 0.0001",
       "note: --min-lr: no effect, the cosine schedule's floor and --sched is step"},
      {"--warmup-lr 0.0001", "note: --warmup-lr: no effect, the warmup's start and there is none"},
      {"--depth 1 --drop-path 0.5", "note: --drop-path: no effect on a model of one block"},
      {"--aa rand-m9-n2 --color-jitter 0.4",
       "note: --color-jitter: no effect with --aa, as in timm's train.py (RandAugment replaces it; "
       "--force-color-jitter keeps it; 3-Augment, --aa 3a, keeps it too)"},
      {"--aa 3a --aa-ops mild", "note: --aa-ops: no effect, 3-Augment has its own three ops"},
      {"--aa 3a --aa-fill gray", "note: --aa-fill: no effect, 3-Augment has no geometric op to fill"},
      {"--remode const", "note: --remode: no effect, random erasing is off (--reprob)"},
      {"--aa 3a", "note: --aa 3a: no color jitter beside it unless --color-jitter is given"},
      {"--grayscale-prob 0.5", "note: --grayscale-prob: no effect, the model's images have 1 channel"},
      {"--color-jitter-prob 0.5",
       "note: --color-jitter-prob: no effect without --color-jitter (off by default)"},
      {"--aa rand-m9 --color-jitter 0.4 --color-jitter-prob 0.5",
       "note: --color-jitter-prob: no effect, --color-jitter is left out for --aa"},
      {"--aa 3a --color-jitter 0.4 --force-color-jitter",
       "note: --force-color-jitter: no effect, it keeps --color-jitter beside RandAugment's --aa and one is "
       "not given (3a keeps it anyway)"},
      {"--opt sgd --nesterov",
       "note: --nesterov: no effect, --opt sgd is Nesterov's already (timm's; --opt momentum is the plain "
       "one)"},
      {"--color-jitter 0.4 --force-color-jitter",
       "note: --force-color-jitter: no effect, it keeps --color-jitter beside RandAugment's --aa and one is "
       "not given (3a keeps it anyway)"},
  };
  for (const auto& [flags, note] : cases) {
    const Result r = run(train + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.out;
    EXPECT_TRUE(has(r, note)) << flags << ": no '" << note << "' in\n" << r.out;
  }
  // The model line leaves it out too (it said "drop path 0.5" beside the note).
  EXPECT_FALSE(has(run(train + "--depth 1 --drop-path 0.5"), "drop path 0.5")) << "a one-block model's line";
  for (const char* recipe : {"mnist-seed", "cifar-seed", "mnist", "fashion-mnist", "finetune"}) {
    // 3 epochs: past the recipes' warmups (a shorter run is told its lr never reaches --lr).
    const Result r = run(train + "--recipe " + recipe + " --model mnist-seed --epochs 3 --patience 0");
    EXPECT_EQ(r.code, 0) << recipe << ": " << r.out;
    EXPECT_FALSE(has(r, "note: --")) << recipe << ": " << r.out;
  }
}

// --img-size and --patch-size take S or H W: given twice, the last wins as for any flag (the
// two were joined into one H W: 16 then 20 made a 16 x 20 model).
TEST(CliArgs, ASizeGivenTwiceIsTheLastOne) {
  auto size = [](const std::string& flags) {
    const Result r = run("info --model mnist-seed " + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out.substr(0, r.out.rfind("}\n") + 1));
    return j.at("img_size").dump() + " " + j.at("patch_size").dump();
  };
  EXPECT_EQ(size("--img-size 16 --img-size 20"), "[20,20] [4,4]");
  EXPECT_EQ(size("--img-size 16 20 --img-size=24"), "[24,24] [4,4]");
  EXPECT_EQ(size("--img-size=16 --img-size 24 28 --patch-size 2 --patch-size=4"), "[24,28] [4,4]");
  EXPECT_EQ(size("--img-size 24 28"), "[24,28] [4,4]");
}

// A timm checkpoint without class names was trained on folders in timm's order (case left
// out): Banana is class 1 of apple, Banana, cherry, where sorted bytes made it class 0. Said
// in a note. A vitcpp run's folders keep the sorted order (its names travel with it).
TEST(CliArgs, ATimmCheckpointWithoutNamesReadsFoldersInTimmsOrder) {
  vit::test::TempDir tmp("args_timm_order");
  for (const char* c : {"apple", "Banana", "cherry"}) {
    const fs::path folder = fs::path(tmp.str()) / "val" / c;
    fs::create_directories(folder);
    fs::copy_file(digit, folder / "a.png");
  }
  const std::string timm = std::string(VIT_FIXTURE_DIR) + "/pretrained/timm_cls_map";
  const Result json = run("eval --json --checkpoint " + timm + " --data-dir " + tmp.str() + " --threads 1");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_EQ(nlohmann::json::parse(json.out.substr(json.out.rfind("{\"")))["class_names"],
            nlohmann::json({"apple", "Banana", "cherry"}))
      << json.out;
  EXPECT_TRUE(has(json, "the class folders are numbered in timm's order")) << json.out;
  EXPECT_TRUE(has(json, "apple -> 0, Banana -> 1, cherry -> 2")) << json.out;
}

// Folders 0-7 and 9 (no 8) for an unnamed 10-class model: folder 9 is class 8, as ImageFolder
// numbers them. The note names that folder, and the model's class 9 is "#9" (both were "9": a
// right answer looked wrong in the table, the predictions and the confusion matrix).
TEST(CliArgs, AFolderNamedAsAnotherClassNumberIsSaidAndNotNamedTwice) {
  vit::test::TempDir tmp("args_digits");
  for (const char* c : {"0", "1", "2", "3", "4", "5", "6", "7", "9"}) {
    const fs::path folder = fs::path(tmp.str()) / "val" / c;
    fs::create_directories(folder);
    fs::copy_file(digit, folder / "a.png");
  }
  const std::string run_dir = tmp / "run";
  ASSERT_EQ(run("train --synthetic 16 --epochs 1 -b 8 --threads 1 --output " + run_dir).code, 0);
  const Result json =
      run("eval --json --checkpoint " + run_dir + " --data-dir " + tmp.str() + " --threads 1");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_EQ(nlohmann::json::parse(json.out.substr(json.out.rfind("{\"")))["class_names"],
            nlohmann::json({"0", "1", "2", "3", "4", "5", "6", "7", "9", "#9"}))
      << json.out;
  EXPECT_TRUE(has(json, "(0 -> 0, 1 -> 1, 2 -> 2, 3 -> 3, 4 -> 4, ..., 9 -> 8)")) << json.out;
}

// A head with more classes than the data has names (5 outputs, 3 named folders) is evaluated
// with the names it has and the indices past them, as vit predict shows it; the names were
// dropped for indices alone.
TEST(CliArgs, EvalNamesTheClassesItHasNamesFor) {
  vit::test::TempDir tmp("args_names");
  for (const char* split : {"train", "val"})
    for (const char* c : {"ant", "bee", "cat"}) {
      const fs::path folder = fs::path(tmp.str()) / split / c;
      fs::create_directories(folder);
      fs::copy_file(digit, folder / "a.png");
    }
  const std::string run_dir = tmp / "run";
  Result r = run("train --model mnist-seed --num-classes 5 --data-dir " + tmp.str() +
                 " --epochs 1 -b 2 --threads 1 --output " + run_dir);
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("eval --checkpoint " + run_dir + " --data-dir " + tmp.str() + " --threads 1 --predictions " +
          (tmp / "p.csv"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "ant: ")) << r.out;
  const Result json =
      run("eval --json --checkpoint " + run_dir + " --data-dir " + tmp.str() + " --threads 1");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_EQ(nlohmann::json::parse(json.out.substr(json.out.rfind("{\"")))["class_names"],
            nlohmann::json({"ant", "bee", "cat", "3", "4"}))
      << json.out;
  EXPECT_TRUE(has(r, "cat: ")) << r.out;
  EXPECT_TRUE(has(r, "4: n/a")) << r.out;
  EXPECT_EQ(
      vit::read_text_file(tmp / "p.csv").rfind("index,label,prediction,label_name,prediction_name,file\n", 0),
      0u);
}

// vit predict on a folder says which image files it leaves out (vit train does): a .bmp
// was skipped without a word.
TEST(CliArgs, PredictOnAFolderNamesTheFormatsItLeavesOut) {
  vit::test::TempDir tmp("args_formats");
  const std::string ck = tiny_run(tmp);
  fs::create_directories(tmp / "imgs");
  fs::copy_file(digit, tmp / "imgs/a.png");
  std::ofstream(tmp / "imgs/b.bmp") << "BM";
  const Result r = run("predict --checkpoint " + ck + " " + (tmp / "imgs"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "1 image file(s) in formats vitcpp does not read")) << r.out;
}

// vit info --checkpoint reads the header alone: ViT-H's 2.4 GB file took 4.7 GB and up to 7 s
// to print its config (the whole file read in, then copied into a model). Checked as the
// largest child's resident memory, a size (a time would fail on a loaded machine).
TEST(CliArgs, InfoOfACheckpointReadsItsHeaderAlone) {
  vit::test::TempDir tmp("args_info");
  const std::string file = tmp / "b16.safetensors";
  vit::save_checkpoint(file, vit::ViT(vit::preset("vit-base-16"), false), {});
  const Result r = run("info --checkpoint " + file);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "\"embed_dim\": 768")) << r.out;
#if !defined(__SANITIZE_ADDRESS__)  // ASan's vit holds about 160 MiB of its own
  rusage children{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &children), 0);
  const double rss_mib = double(children.ru_maxrss) / 1024, file_mib = double(fs::file_size(file)) / 1048576;
  EXPECT_LT(rss_mib, file_mib / 2) << "vit info's resident memory (MiB) for a " << file_mib << " MiB file";
#endif
  // What a load would do is said all the same.
  const Result resized = run("info --checkpoint " + file + " --img-size 64");
  ASSERT_EQ(resized.code, 0) << resized.out;
  EXPECT_TRUE(has(resized, "pos_embed resampled from a 14x14 grid to 4x4")) << resized.out;
}
