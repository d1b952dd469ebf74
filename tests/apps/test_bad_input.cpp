// Bad input to the vit program, as a table: each case must exit non-zero with a message that
// names the file (or flag) and the problem, and must leave no checkpoint behind. Covers
// corrupt and truncated checkpoints, wrong tensor shapes, corrupt images in an image folder
// (and --skip-bad-images), labels out of range in IDX and CIFAR files, empty datasets,
// impossible flags and a run that will not fit in memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file.h"
#include "data/image.h"
#include "io/safetensors.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {
namespace fs = std::filesystem;
using vit::test::run_vit;

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

// IDX files of n 8x8 images with the given labels (n = labels.size()).
void write_idx(const std::string& dir, const std::string& prefix, const std::vector<uint8_t>& labels) {
  const auto n = uint32_t(labels.size());
  write_bytes(dir + "/" + prefix + "-images-idx3-ubyte",
              be32(0x803) + be32(n) + be32(8) + be32(8) + std::string(n * 64, '\x40'));
  write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte",
              be32(0x801) + be32(n) + std::string(labels.begin(), labels.end()));
}

vit::Image gray(int64_t h, int64_t w) {
  vit::Image img{h, w, 1, std::vector<uint8_t>(size_t(h * w))};
  for (size_t i = 0; i < img.px.size(); ++i) img.px[i] = uint8_t(i * 7);
  return img;
}

bool has_checkpoint(const fs::path& dir) {
  if (!fs::exists(dir)) return false;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

struct Case {
  std::string name, args;
  std::vector<std::string> expect;  // substrings of the output: the file or flag, the problem
  std::string env = "";
};

// Each case exits non-zero, names what is wrong, does not crash, and leaves no --output.
void expect_refused(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const auto r = run_vit(c.args, c.env);
    EXPECT_NE(r.code, 0) << c.name << ": " << r.out;
    for (const auto& e : c.expect)
      EXPECT_NE(r.out.find(e), std::string::npos) << c.name << ": no '" << e << "' in\n" << r.out;
    EXPECT_EQ(r.out.find("Segmentation"), std::string::npos) << c.name;
    const auto at = c.args.find("--output ");
    if (at != std::string::npos) {
      const std::string out = c.args.substr(at + 9);
      EXPECT_FALSE(fs::exists(out)) << c.name << ": refused input must not leave " << out;
    }
  }
}

const std::string kTrain = "train --threads 1 --model mnist-seed --epochs 1 -b 8 ";

// A real checkpoint (d/good/last.safetensors), spoiled copies of it, and a PNG.
struct Spoiled {
  vit::test::TempDir tmp{"bad"};
  std::string d = tmp.str(), ckpt = d + "/good/last.safetensors", png = d + "/digit.png";
  Spoiled() {
    auto good = run_vit(kTrain + "--img-size 16 --synthetic 16 --output " + d + "/good");
    EXPECT_EQ(good.code, 0) << good.out;
    const auto bytes = vit::read_file_bytes(ckpt);
    write_bytes(d + "/truncated.safetensors",
                std::string(bytes.begin(), bytes.begin() + long(bytes.size() / 2)));
    write_bytes(d + "/garbage.safetensors", std::string("\x10\0\0\0\0\0\0\0{not json at all", 24));
    write_bytes(d + "/tiny.safetensors", "abc");
    const vit::SafeTensors st = vit::SafeTensors::open(ckpt);
    std::vector<std::vector<float>> data;
    std::vector<vit::TensorOut> out;
    for (const auto& t : st.tensors()) data.push_back(st.to_float(t.name));
    for (size_t i = 0; i < st.tensors().size(); ++i) {
      const auto& t = st.tensors()[i];
      vit::Shape shape = t.shape;
      if (t.name == "head.bias") shape = {shape[0] - 1};
      out.push_back({t.name, shape, vit::DType::F32, data[i].data()});
    }
    vit::write_safetensors(d + "/wrong_shape.safetensors", out, st.metadata());
    vit::write_png(png, gray(16, 16));
  }
};
}  // namespace

TEST(BadInput, CorruptCheckpointsAreRefusedByName) {
  const Spoiled s;
  const std::string& d = s.d;
  const std::string& ckpt = s.ckpt;
  const std::string& png = s.png;
  expect_refused({
      {"truncated checkpoint",
       "info --checkpoint " + d + "/truncated.safetensors",
       {d + "/truncated.safetensors", "truncated file"}},
      {"header not JSON",
       "predict --checkpoint " + d + "/garbage.safetensors " + png,
       {d + "/garbage.safetensors", "not valid JSON"}},
      {"too short",
       "info --checkpoint " + d + "/tiny.safetensors",
       {d + "/tiny.safetensors", "not a safetensors file"}},
      {"wrong shape",
       "predict --checkpoint " + d + "/wrong_shape.safetensors " + png,
       {d + "/wrong_shape.safetensors", "head.bias", "the model expects"}},
      {"wrong shape fine-tuning",
       "train --threads 1 --epochs 1 -b 8 --pretrained " + d +
           "/wrong_shape.safetensors --synthetic 8 --output " + d + "/o_ws",
       {d + "/wrong_shape.safetensors", "head.bias"}},
      {"average into one of its inputs",
       "average " + ckpt + " " + d + "/good/best.safetensors -o " + ckpt,
       {"--output", "is one of the inputs"}},
      {"average to a .pth",
       "average " + ckpt + " -o " + d + "/avg.pth",
       {"--output " + d + "/avg.pth: the average is written as safetensors"}},
      {"average a corrupt checkpoint",
       "average " + ckpt + " " + d + "/truncated.safetensors -o " + d + "/o_avg.safetensors",
       {"truncated.safetensors"}},
      {"an image over the pixel limit names the variable that raises it",
       "predict --checkpoint " + ckpt + " " + png,
       {png + ": 16 x 16 pixels, more than the 255 an image may have (VIT_MAX_IMAGE_PIXELS=N raises"},
       "VIT_MAX_IMAGE_PIXELS=255"},
      {"--topk 0 names --topk alone",
       "predict --topk 0 --checkpoint " + ckpt + " " + png,
       {"--topk must be positive, got 0"}},
      {"a pixel limit that is no count",
       "predict --checkpoint " + ckpt + " " + png,
       {"VIT_MAX_IMAGE_PIXELS=-1: not a limit"},
       "VIT_MAX_IMAGE_PIXELS=-1"},
  });
  for (const char* limit : {"256", "0"}) {  // at the limit; 0 lifts it, as Pillow's None
    const auto r =
        run_vit("predict --checkpoint " + ckpt + " " + png, std::string("VIT_MAX_IMAGE_PIXELS=") + limit);
    EXPECT_EQ(r.code, 0) << limit << ": " << r.out;
  }
}

TEST(BadInput, DatasetsWithBadLabelsOrNoImagesAreRefusedByName) {
  vit::test::TempDir tmp("baddata");
  const std::string d = tmp.str();
  // IDX: a label past the head's classes (10; the data's are the largest label + 1, for
  // EMNIST), an empty training file.
  write_idx(d + "/idx_label", "train", {1, 2, 12, 3});
  write_idx(d + "/idx_label", "t10k", {1, 2});
  write_idx(d + "/idx_empty", "train", {});
  write_idx(d + "/idx_empty", "t10k", {1});
  write_idx(d + "/idx_train_only", "train", {1, 2});
  // CIFAR-10: label 10 in the second record of data_batch_1.bin.
  auto cifar = [](std::vector<uint8_t> labels) {
    std::string b;
    for (uint8_t l : labels) b += char(l) + std::string(3072, '\x20');
    return b;
  };
  for (int k = 1; k <= 5; ++k)
    write_bytes(d + "/cifar/data_batch_" + std::to_string(k) + ".bin", cifar({uint8_t(k == 1 ? 10 : 1), 2}));
  write_bytes(d + "/cifar/test_batch.bin", cifar({3}));

  expect_refused({
      {"IDX label out of range",
       kTrain + "--data-dir " + d + "/idx_label --img-size 8 --output " + d + "/o_idx",
       {d + "/idx_label has 13 classes; the model's head has 10 (set --num-classes 13)"}},
      {"IDX without test files names --val-split",
       kTrain + "--data-dir " + d + "/idx_train_only --img-size 8 --output " + d + "/o_train_only",
       {d + "/idx_train_only: no IDX test files",
        "--val-split 0.1 holds a tenth of the training set out instead"}},
      {"IDX empty",
       kTrain + "--data-dir " + d + "/idx_empty --img-size 8 --output " + d + "/o_empty",
       {d + "/idx_empty/train-images-idx3-ubyte", "holds no images"}},
      {"CIFAR label out of range",
       kTrain + "--data-dir " + d + "/cifar --output " + d + "/o_cifar",
       {d + "/cifar/data_batch_1.bin", "label 10 of record 0 is out of range for 10 classes"}},
  });
}

// Flags that cannot work.
TEST(BadInput, ImpossibleFlagsAreRefused) {
  const Spoiled s;
  const std::string& d = s.d;
  const std::string& ckpt = s.ckpt;
  const std::string& png = s.png;
  write_idx(d + "/idx", "train", {1, 2});
  write_idx(d + "/idx", "t10k", {1, 2});
  expect_refused({
      {"batch 0", kTrain + "--synthetic 8 -b 0 --output " + d + "/o_b0", {"--batch-size must be positive"}},
      {"negative lr",
       kTrain + "--synthetic 8 --lr -0.1 --output " + d + "/o_lr",
       {"--lr (the learning rate) must be a positive number, got -0.1"}},
      {"epochs 0",
       kTrain + "--synthetic 8 --epochs 0 --output " + d + "/o_ep",
       {"--epochs must be positive, got 0"}},
      {"three patch sizes",
       kTrain + "--synthetic 8 --patch-size 4 4 4 --output " + d + "/o_p3",
       {"--patch-size takes one size or two (height width), got 3 values"}},
      {"lr inf",
       kTrain + "--synthetic 8 --lr inf --output " + d + "/o_inf",
       {"--lr (the learning rate) must be a positive number, got inf"}},
      {"heads do not divide",
       kTrain + "--synthetic 8 --embed-dim 10 --num-heads 3 --output " + d + "/o_h",
       {"does not divide embed_dim"}},
      {"image smaller than a patch",
       kTrain + "--synthetic 8 --img-size 3 --patch-size 4 --output " + d + "/o_p",
       {"is smaller than one patch"}},
      // Numeric flags whose "not given" is a sentinel: refused, not taken for "not given".
      {"negative depth",
       kTrain + "--synthetic 8 --depth -2 --output " + d + "/o_depth",
       {"--depth: a positive number, got -2"}},
      {"no classes",
       kTrain + "--synthetic 8 --num-classes 0 --output " + d + "/o_cls",
       {"--num-classes: a positive number, got 0"}},
      {"dropout of 1",
       kTrain + "--synthetic 8 --drop 1 --output " + d + "/o_drop",
       {"--drop: a rate in [0, 1), got 1"}},
      {"negative threads",
       "eval --threads -2 --checkpoint " + ckpt + " --data-dir " + d + "/idx",
       {"--threads: 0 (every core) to 4096, got -2"}},
      // libgomp crashed starting 100,000 threads (SIGSEGV) and stopped the process at 40,000.
      {"a hundred thousand threads",
       "predict --threads 100000 --checkpoint " + ckpt + " " + png,
       {"--threads: 0 (every core) to 4096, got 100000"}},
      {"negative mixup",
       kTrain + "--synthetic 8 --mixup -1 --output " + d + "/o_mix",
       {"--mixup must be non-negative (0 = off), got -1"}},
      {"mixup prob 2",
       kTrain + "--synthetic 8 --mixup 0.8 --mixup-prob 2 --output " + d + "/o_mixp",
       {"--mixup-prob must be a probability, got 2"}},
      {"negative crop padding",
       kTrain + "--synthetic 8 --crop-pad -3 --output " + d + "/o_pad",
       {"--crop-pad must be in [0, 2^20] pixels, got -3"}},
      {"aspect ratios reversed",
       kTrain + "--synthetic 8 --scale 0.5 1 --ratio 2 1 --output " + d + "/o_ratio",
       {"--ratio must satisfy 0 < min <= max"}},
      // CLI11 let these end after one value, and the crop stayed off without a word.
      {"one scale value",
       kTrain + "--synthetic 8 --scale 0.5 --output " + d + "/o_scale1",
       {"--scale takes two values, MIN MAX", "got 1"}},
      {"a ratio without the crop",
       kTrain + "--synthetic 8 --ratio 0.5 2 --output " + d + "/o_ratio2",
       {"--ratio shapes the random resized crop, which --scale MIN MAX turns on"}},
      {"negative warmup lr",
       kTrain + "--synthetic 8 --warmup-epochs 1 --warmup-lr -1 --output " + d + "/o_wlr",
       {"warmup lr must be >= 0, got -1"}},
      {"two recipes",
       kTrain + "--synthetic 8 --recipe mnist-seed --recipe=cifar-seed --output " + d + "/o_rec2",
       {"--recipe given twice ('mnist-seed' and 'cifar-seed')"}},
      {"an unknown recipe after =",
       kTrain + "--synthetic 8 --recipe=nosuch --output " + d + "/o_rec3",
       {"unknown recipe 'nosuch' (known: "}},
      {"a flag CLI11 does not know",
       kTrain + "--synthetic 8 --bogus --output " + d + "/o_bogus",
       {"vit: error: The following argument was not expected: --bogus", "run 'vit train --help'"}},
      {"negative synthetic count",
       kTrain + "--synthetic -8 --output " + d + "/o_syn",
       {"--synthetic: a positive number, got -8"}},
      {"validation split of 1.5",
       kTrain + "--synthetic 8 --val-split 1.5 --output " + d + "/o_val",
       {"--val-split: a fraction in [0, 1), got 1.5"}},
      {"negative sample count",
       "samples --data-dir " + d + "/idx -n -1 --out " + d + "/o_samples",
       {"--count: a positive number, got -1"}},
      {"negative bench time", "bench --model mnist-seed --min-time -1", {"--min-time: 0 or more, got -1"}},
      {"negative log interval",
       kTrain + "--synthetic 8 --log-every -5 --output " + d + "/o_log",
       {"--log-interval must be a number of steps (0: none), got -5"}},
      {"cooldown after a step schedule",
       kTrain + "--synthetic 8 --sched step --cooldown-epochs 2 --output " + d + "/o_cool",
       {"--cooldown-epochs follow the cosine schedule (timm's), not --sched step"}},
      {"color jitter with a hue",
       kTrain + "--synthetic 8 --color-jitter 0.4 0.4 0.4 0.1 --output " + d + "/o_cj",
       {"--color-jitter: hue (a 4th value) is not supported"}},
      {"negative color jitter",
       kTrain + "--synthetic 8 --color-jitter -0.4 --output " + d + "/o_cj2",
       {"--color-jitter must be non-negative, got -0.4"}},
      {"negative checkpoint history",
       kTrain + "--synthetic 8 --checkpoint-hist -1 --output " + d + "/o_hist",
       {"--checkpoint-hist: 0 or more, got -1"}},
      {"crop of zero",
       "predict --checkpoint " + ckpt + " --crop-pct 0 " + png,
       {"--crop-pct: a positive number, got 0"}},
  });
}

// Values at the edges, found by testers sweeping every numeric flag: each was taken, then
// blamed on --lr, trained or drew something else, or took the machine's memory.
TEST(BadInput, ValuesAtTheirEdgesAreRefused) {
  const Spoiled s;
  const std::string& d = s.d;
  write_idx(d + "/idx", "train", {1, 2});
  write_idx(d + "/idx", "t10k", {1, 2});
  expect_refused({
      // Other commands' edges (a tester's sweep): --in-chans filled 34 GB before its limit was
      // checked; a non-finite --mean turned samples' images black with exit 0; int64 flags past
      // their range ran at 2^63 - 1; bench's 0 batch and runs were no usage error, and
      // --min-time inf ran 10^8 times.
      {"in_chans past the limit",
       "info --model mnist-seed --in-chans 4294967296",
       {"--in-chans 4294967296 is implausibly large (at most 1024)"}},
      {"samples with a NaN mean",
       "samples --data-dir " + d + "/idx --out " + d + "/s_nan -n 1 --hflip 1 --mean nan",
       {"--mean must be finite, got nan"}},
      {"an epoch past int64",
       "samples --data-dir " + d + "/idx --out " + d + "/s_big -n 1 --hflip 0.5 --epoch 18446744073709551616",
       {"--epoch: a whole number in [-2^63, 2^63 - 1], got 18446744073709551616"}},
      {"bench batch 0", "bench --model mnist-seed -b 0", {"--batch-size: a positive number, got 0"}},
      {"bench runs 0", "bench --model mnist-seed --runs 0", {"--runs: a positive number, got 0"}},
      {"bench forever", "bench --model mnist-seed --min-time inf", {"--min-time: 0 or more, got inf"}},
      // vit train's: infinities and counts past 2^53 were taken, then blamed on --lr ("training
      // diverged"), trained nothing, or wrapped the schedule; --scale 0 turned the crop off.
      {"a RandAugment magnitude past its max",
       kTrain + "--synthetic 8 --aa rand-m15-n2 --output " + d + "/o_aa",
       {"--aa rand-m15-n2: magnitude 15 is above mmax"}},
      {"a crop of no area",
       kTrain + "--synthetic 8 --scale 0 1 --output " + d + "/o_sc0",
       {"--scale 0 1: the smallest crop must be a share above 0 of the image"}},
      {"infinite mixup",
       kTrain + "--synthetic 8 --mixup inf --output " + d + "/o_mixinf",
       {"--mixup and --cutmix must be finite (0 = off)"}},
      {"infinite weight decay",
       kTrain + "--synthetic 8 --weight-decay inf --output " + d + "/o_wd",
       {"--weight-decay must be a non-negative number, got inf"}},
      {"infinite eps",
       kTrain + "--synthetic 8 --opt-eps 1e39 --output " + d + "/o_eps",
       {"--opt-eps must be a positive number, got inf"}},
      {"infinite decay rate",
       kTrain + "--synthetic 8 --sched step --decay-rate inf --output " + d + "/o_dr",
       {"--decay-rate must be a positive number, got inf"}},
      {"infinite milestone",
       kTrain + "--synthetic 8 --sched multistep --decay-milestones inf --output " + d + "/o_ms",
       {"--decay-milestones must be finite epochs, got inf"}},
      {"a milestone past 2^53 steps",
       kTrain + "--synthetic 8 --sched multistep --decay-milestones 1e30 --output " + d + "/o_ms2",
       {"--decay-milestones 1e+30: ", "a run counts at most 2^53"}},
      {"cooldown past int64",
       kTrain + "--synthetic 8 --cooldown-epochs 9223372036854775807 --output " + d + "/o_cd",
       {"--cooldown-epochs must be at most 2^53, got 9223372036854775807"}},
      {"epochs past 2^53 steps",
       kTrain + "--synthetic 64 -b 8 --epochs 4611686018427387905 --output " + d + "/o_ep",
       {"--epochs must be at most 2^53"}},
      {"infinite warmup",
       kTrain + "--synthetic 8 --warmup-epochs inf --output " + d + "/o_wu",
       {"--warmup-epochs, --decay-epochs and --clip-grad must be finite numbers"}},
  });
}

TEST(BadInput, ARunTooBigForMemoryIsRefusedUnlessTheCheckIsOff) {
  vit::test::TempDir tmp("badmem");
  const std::string d = tmp.str();
  expect_refused({
      {"too big for memory",
       kTrain + "--synthetic 16 -b 16 --output " + d + "/o_mem",  // about 1.9 MiB at batch 16
       {"needs about", "activations", "only 1.0 MiB is available", "--no-memory-check"},
       "VIT_MEMORY_LIMIT=1M"},
  });
  // The same run with the memory check off starts (and, being tiny, finishes).
  auto r =
      run_vit(kTrain + "--synthetic 8 --no-memory-check --output " + d + "/small", "VIT_MEMORY_LIMIT=1M");
  EXPECT_EQ(r.code, 0) << r.out;
  // Fine-tuning those weights needs what training them anew needs: the plan left a loaded
  // model's weights and gradients out ("params 0 B, grads 0 B"), and a run too big started.
  const auto fresh =
      run_vit(kTrain + "--synthetic 16 -b 16 --output " + d + "/o_fresh", "VIT_MEMORY_LIMIT=1M");
  const auto tuned = run_vit("train --threads 1 --epochs 1 --pretrained " + d + "/small/best.safetensors " +
                                 "--synthetic 16 -b 16 --output " + d + "/o_tuned",
                             "VIT_MEMORY_LIMIT=1M");
  EXPECT_NE(tuned.code, 0) << tuned.out;
  const auto plan = [](const std::string& out) {
    const size_t at = out.find("needs about");
    return at == std::string::npos ? out : out.substr(at, out.find(", but only", at) - at);
  };
  EXPECT_EQ(plan(tuned.out), plan(fresh.out)) << tuned.out;
  EXPECT_EQ(tuned.out.find("params 0 B"), std::string::npos) << tuned.out;
}

// An output that would replace one of the command's inputs, a directory given as an output
// file, and one file given to two outputs are refused before any work, and the inputs stay
// as they were (--predictions best.safetensors replaced the weights with a CSV).
TEST(BadInput, OutputsThatWouldReplaceAnInputOrEachOtherAreRefused) {
  const Spoiled s;
  const std::string& d = s.d;
  write_idx(d + "/idx", "train", {1, 2});
  write_idx(d + "/idx", "t10k", {1, 2});
  const auto before = vit::read_file_bytes(s.ckpt);
  const std::string summary = d + "/good/summary.csv";
  const auto summary_before = vit::read_file_bytes(summary);
  const std::string eval = "eval --checkpoint " + s.ckpt + " --data-dir " + d + "/idx ";
  // Pictures are PNG only (any other name is refused first): links with a .png name reach the
  // summary and the checkpoint.
  const std::string summary_png = d + "/summary_link.png", ckpt_png = d + "/ckpt_link.png";
  fs::create_symlink(summary, summary_png);
  fs::create_symlink(s.ckpt, ckpt_png);
  expect_refused({
      {"predictions over the checkpoint",
       eval + "--predictions " + s.ckpt,
       {"--predictions " + s.ckpt + ": the command reads that file; writing it would replace it"}},
      {"two outputs in one file",
       eval + "--predictions " + d + "/x.png --confusion-png " + d + "/x.png",
       {"--confusion-png " + d + "/x.png: also given to --predictions"}},
      {"an output that is a directory",
       eval + "--results-file " + d,
       {"--results-file " + d + ": a directory"}},
      {"curves over the summary",
       "plot --run " + d + "/good --out " + summary_png,
       {"--out " + summary_png + ": the command reads that file"}},
      {"similarity over the checkpoint",
       "plot --pos-embed --checkpoint " + s.ckpt + " --out " + ckpt_png,
       {"--out " + ckpt_png + ": the command reads that file"}},
      {"results over the image",
       "predict --checkpoint " + s.ckpt + " " + s.png + " --results-file " + s.png,
       {"--results-file " + s.png + ": the command reads that file"}},
  });
  EXPECT_TRUE(vit::read_file_bytes(s.ckpt) == before);
  EXPECT_TRUE(vit::read_file_bytes(summary) == summary_before);
  EXPECT_FALSE(fs::exists(d + "/x.csv"));
}

// A file output in a folder that does not exist: the folder is made, as `vit train --output`
// makes its run directory (vit::AtomicFile alone names the folder: tests/core).
TEST(BadInput, AFileOutputInAMissingFolderGetsTheFolder) {
  const Spoiled s;
  const std::string missing = s.d + "/no/such";
  const std::string file = missing + "/out";
  for (const std::string& cmd : {"quantize --checkpoint " + s.ckpt + " --out " + file + ".safetensors",
                                 "export --format onnx --checkpoint " + s.ckpt + " --out " + file + ".onnx",
                                 "average " + s.ckpt + " -o " + file + "_avg.safetensors"}) {
    const auto r = run_vit(cmd);
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.out;
  }
  for (const std::string out : {".safetensors", ".onnx", "_avg.safetensors"})
    EXPECT_TRUE(fs::is_regular_file(file + out)) << file + out;
}

// The memory plan counts a model EMA (one more copy of the weights, with the optimizer's
// state) and the whole global batches the prefetcher holds with --grad-accum-steps.
TEST(BadInput, TheMemoryPlanCountsTheModelEmaAndTheGlobalBatch) {
  const std::string tiny = "train --threads 1 --model mnist-seed --synthetic 8 ";
  auto plain = run_vit(tiny, "VIT_MEMORY_LIMIT=1M");
  auto ema = run_vit(tiny + "--model-ema", "VIT_MEMORY_LIMIT=1M");
  auto accum = run_vit(tiny + "--grad-accum-steps 4", "VIT_MEMORY_LIMIT=1M");
  EXPECT_NE(plain.out.find("optimizer 19.9 KiB"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("batch buffers 786.0 KiB"), std::string::npos) << plain.out;
  EXPECT_NE(ema.out.find("optimizer 29.8 KiB"), std::string::npos) << ema.out;
  EXPECT_NE(accum.out.find("batch buffers 3.1 MiB"), std::string::npos) << accum.out;
}

// A directory where a file is meant (or a directory that is not what is meant): one line
// naming it, never std::bad_alloc (a directory opened as a file reads as 2^63 bytes).
TEST(BadInput, DirectoriesWhereFilesAreMeantGiveAOneLineError) {
  vit::test::TempDir tmp("dirs");
  const std::string d = tmp.str(), dir = d + "/somedir";
  fs::create_directories(dir);
  auto good =
      run_vit("train --threads 1 --model mnist-seed --img-size 16 --synthetic 16 --epochs 1 -b 8 --output " +
              d + "/run");
  ASSERT_EQ(good.code, 0) << good.out;
  const std::string ck = " --checkpoint " + d + "/run/last.safetensors ";
  const std::vector<Case> cases = {
      // predict takes a folder's images (an empty folder is an error), eval a dataset's
      {"image folder without images",
       "predict" + ck + dir + "/",
       {dir + "/: a folder without PNG or JPEG files"}},
      {"config", "info --config " + dir + "/", {dir + "/: a directory, where a file is meant"}},
      {"labels",
       "predict" + ck + "--labels " + dir + " " + dir,
       {dir + ": a directory, where a file is meant"}},
      {"tensor", "predict" + ck + "--tensor " + dir + ":x", {dir + ": a directory, where a file is meant"}},
      {"checkpoint",
       "predict --checkpoint " + dir + " " + dir,
       {dir + ": a directory without model.safetensors (timm, Hugging Face) or best.safetensors (a vit train "
              "run)"}},
      {"--last on a file", "predict --last" + ck + dir, {"--last: " + d + "/run/last.safetensors is a file"}},
      {"resume a directory that is no run",
       "train --resume " + dir,
       {"--resume " + dir + ": not a run directory (no args.json; vit train --output DIR makes one)"}},
      {"resume nothing", "train --resume " + d + "/none", {"--resume " + d + "/none: no such directory"}},
      {"plot", "plot --run " + dir, {dir + "/summary.csv: cannot open"}},
  };
  for (const Case& c : cases) {
    const auto r = run_vit(c.args);
    EXPECT_NE(r.code, 0) << c.name << ": " << r.out;
    EXPECT_EQ(r.out.rfind("vit: error: " + c.expect[0], 0), 0u) << c.name << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.name << ": one line, got " << r.out;
  }
}

TEST(BadInput, CorruptImagesInAFolderStopTheRunOrAreSkippedWithACount) {
  vit::test::TempDir tmp("badimg");
  const std::string d = tmp.str();
  for (const char* split : {"train", "val"})
    for (const char* cls : {"a", "b"}) {
      fs::create_directories(d + "/" + split + "/" + cls);
      vit::write_png(d + "/" + split + "/" + cls + "/ok.png", gray(20, 20));
    }
  const auto ok = vit::read_file_bytes(d + "/train/a/ok.png");
  write_bytes(d + "/train/a/text.png", "this is not an image");
  write_bytes(d + "/train/b/cut.png", std::string(ok.begin(), ok.begin() + long(ok.size() / 2)));
  write_bytes(d + "/val/a/bad.jpg", "\xff\xd8\xff\xe0 a JPEG that stops here");
  const std::string train =
      "train --threads 1 --model mnist-seed --img-size 16 --num-classes 2 --epochs 1 -b 2 --data-dir " + d;
  auto r = run_vit(train + " --output " + d + "/stop");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(r.out.find(d + "/train/a/text.png") != std::string::npos ||
              r.out.find(d + "/train/b/cut.png") != std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--skip-bad-images"), std::string::npos) << "the message says how to go on: " << r.out;
  EXPECT_FALSE(has_checkpoint(d + "/stop"));
  // Nothing trained, nothing to resume: the directory is given back, so the command, mended
  // as the message says, runs under the same --output (it was "already holds a run").
  EXPECT_FALSE(fs::exists(d + "/stop")) << r.out;
  EXPECT_NE(r.out.find("removed " + d + "/stop's files"), std::string::npos) << r.out;
  r = run_vit(train + " --skip-bad-images --output " + d + "/stop");
  EXPECT_EQ(r.code, 0) << r.out;
  r = run_vit(train + " --skip-bad-images --output " + d + "/skip");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipped 3 image(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(d + "/val/a/bad.jpg: corrupt JPEG"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(d + "/train/a/text.png: not a PNG or JPEG file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(d + "/train/b/cut.png: corrupt PNG"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 images in 2 classes"), std::string::npos) << r.out;
  EXPECT_TRUE(has_checkpoint(d + "/skip"));
  // A gray model on a folder says how color is read; a head wider than the data says so.
  EXPECT_NE(r.out.find("note: the model takes 1 channel: color images are read as gray (--in-chans 3 keeps "
                       "color)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("fits it to the data"), std::string::npos) << r.out;
  const std::string wide =
      "train --threads 1 --model mnist-seed --img-size 16 --epochs 1 -b 2 --data-dir " + d;
  r = run_vit(wide + " --skip-bad-images --in-chans 3");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(
      r.out.find("note: " + d + " has 2 classes, the model's head 10 (--num-classes 2 fits it to the data)"),
      std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("read as gray"), std::string::npos) << r.out;
  // vit eval: the same choice, the list on stderr so that --json stays one object.
  const std::string eval = "eval --threads 1 --checkpoint " + d + "/skip/last.safetensors --data-dir " + d;
  r = run_vit(eval + " --json");
  // vit's one-line error, exit 1: the batch is loaded on the threads, and an exception leaving
  // them used to end the program ("terminate called after throwing", SIGABRT) until 2026-11-29.
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("vit: error: " + d + "/val/a/bad.jpg: corrupt JPEG"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  // Only the split evaluated is read: the two bad training images are neither decoded nor
  // counted (before 2026-11-29 both splits were opened, and the list held all three).
  const std::string out = d + "/eval.json", err = d + "/eval.err";
  ASSERT_EQ(
      std::system(
          (std::string(VIT_BINARY) + " " + eval + " --json --skip-bad-images >" + out + " 2>" + err).c_str()),
      0)
      << vit::read_text_file(err);
  EXPECT_NE(vit::read_text_file(err).find("skipped 1 image(s)"), std::string::npos)
      << vit::read_text_file(err);
  EXPECT_EQ(vit::read_text_file(err).find("/train/"), std::string::npos) << vit::read_text_file(err);
  const std::string json = vit::read_text_file(out);
  EXPECT_EQ(json.front(), '{') << "stdout is the JSON alone: " << json;
  EXPECT_NE(json.find("\"count\":2"), std::string::npos) << json;
}

// A config far larger than its weights (Hugging Face's hidden_size 8192 over 8-wide tensors):
// the model it describes did not fit, and the error said "out of memory: lower --batch-size",
// naming neither the file nor the mismatch. Under a 2 GB address-space limit here (ASan's
// shadow memory cannot run under one). (vit info reads the header alone: it makes no model.)
TEST(BadInput, AConfigFarLargerThanItsWeightsIsNamed) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory needs more address space than the limit";
#endif
  const Spoiled s;
  const std::string hf = s.d + "/hf";
  const auto exported = run_vit("export --checkpoint " + s.ckpt + " --format hf --out " + hf);
  ASSERT_EQ(exported.code, 0) << exported.out;
  auto config = nlohmann::json::parse(vit::read_text_file(hf + "/config.json"));
  config["hidden_size"] = 8192;
  config["num_attention_heads"] = 64;
  config["intermediate_size"] = 32768;
  config["num_hidden_layers"] = 64;
  vit::write_file_atomic(hf + "/config.json", config.dump());
  const auto r = run_vit("predict --checkpoint " + hf + " " + s.png, "ulimit -v 2000000;");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(hf + "/model.safetensors: out of memory making the model its config describes"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("check the config"), std::string::npos) << r.out;
}

// A served model's name is a URL's path segment and a metrics label: one with '/' could not be
// reached, and one that is not UTF-8 made /metrics unreadable to Prometheus for every model.
TEST(BadInput, AServedModelNameAURLCannotHoldIsRefused) {
  const Spoiled s;
  for (const std::string name : {"a/b", "caf\xE9"}) {
    const auto r = run_vit("serve --port 0 --no-warmup --model '" + name + "=" + s.ckpt + "'");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("must be UTF-8 text without '/' or control characters (URLs name it)"),
              std::string::npos)
        << r.out;
  }
}
