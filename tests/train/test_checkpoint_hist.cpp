// The checkpoint history (vit train --checkpoint-hist, timm's CheckpointSaver) and checkpoint
// averaging (vit average, timm's avg_checkpoints.py): which epochs are kept, which files are
// chosen, and the mean itself, against values worked out here.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/file.h"
#include "io/checkpoint.h"
#include "support/models.h"
#include "support/temp_dir.h"
#include "train/average.h"
#include "train/run_dir.h"

namespace vit {

namespace {
namespace fs = std::filesystem;

std::string kept_str(const std::vector<double>& scores, int64_t n) {
  std::string s;
  for (int64_t e : kept_checkpoints(scores, n)) {
    if (!s.empty()) s += ' ';
    s += std::to_string(e);
  }
  return s;
}

std::string names(const CheckpointSelection& sel) {
  std::string s;
  for (auto& f : sel.files) {
    if (!s.empty()) s += ' ';
    s += fs::path(f.file).filename().string();
  }
  return s;
}

// A checkpoint of tiny_vit with weights from `seed` and eval_top1 = top1 ("" for none).
void write_model(const std::string& path, uint64_t seed, const std::string& top1,
                 ViTConfig c = test::tiny_vit()) {
  ViT m(c);
  m.init_weights(seed);
  std::map<std::string, std::string> meta;
  if (!top1.empty()) meta["eval_top1"] = top1;
  save_checkpoint(path, m, meta, false);
}
}  // namespace

// timm's rule replayed by hand, 3 kept: epoch 1 (0.5) and 2 (0.7) enter while there is room,
// 3 (0.6) too; 4 (0.7) beats the worst (1) and ranks after 2, its equal but earlier; 5 (0.9)
// beats the worst (3). An epoch only equal to the worst stays out.
TEST(CheckpointHist, KeepsTheBestAsTimmsCheckpointSaver) {
  EXPECT_EQ(kept_str({0.5, 0.7, 0.6, 0.7, 0.9}, 3), "5 2 4");
  EXPECT_EQ(kept_str({0.5, 0.7, 0.6}, 3), "2 3 1");
  EXPECT_EQ(kept_str({0.5, 0.5, 0.4}, 1), "1");
  EXPECT_EQ(kept_str({0.5, 0.5, 0.6}, 2), "3 1");
  EXPECT_EQ(kept_str({0.3, 0.2, 0.1}, 10), "1 2 3");
  EXPECT_EQ(kept_str({0.3, 0.2, 0.1}, 0), "");
  EXPECT_EQ(kept_str({}, 3), "");
}

TEST(CheckpointHist, FindsAndPrunesOnlyItsOwnFiles) {
  test::TempDir dir("hist");
  for (const char* f : {"checkpoint-3.safetensors", "checkpoint-10.safetensors", "checkpoint-07.safetensors",
                        "checkpoint-x.safetensors", "checkpoint-3.safetensors.tmp.12",
                        "checkpoint-.safetensors", "last.safetensors"})
    write_file_atomic(dir / f, "x");
  EXPECT_EQ(checkpoint_epochs(dir.str()), (std::vector<int64_t>{3, 10}));
  const auto files = run_files(dir.str());
  EXPECT_NE(std::find(files.begin(), files.end(), "checkpoint-10.safetensors"), files.end());
  prune_checkpoints(dir.str(), {10});
  EXPECT_EQ(checkpoint_epochs(dir.str()), (std::vector<int64_t>{10}));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-07.safetensors"));  // not the history's: left alone
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
  EXPECT_TRUE(checkpoint_epochs(dir / "missing").empty());
}

// A run that failed before its first state loses its files, so the mended command takes the
// name again; but an epoch's weights written before the state's write failed (a full disk)
// are kept (they were removed with the rest).
TEST(RunDir, AnUntrainedRunIsRemovedButAnEpochsWeightsAreKept) {
  test::TempDir tmp("untrained");
  const fs::path run = tmp / "run";
  fs::create_directories(run);
  write_file_atomic((run / "args.json").string(), "{}");
  EXPECT_FALSE(run_has_state(run.string()));
  EXPECT_TRUE(remove_untrained_run(run.string(), true));
  EXPECT_FALSE(fs::exists(run));
  fs::create_directories(run);
  write_file_atomic((run / "args.json").string(), "{}");
  write_file_atomic((run / "last.safetensors").string(), "weights");
  EXPECT_FALSE(remove_untrained_run(run.string(), true));
  EXPECT_TRUE(fs::exists(run / "last.safetensors"));
  write_file_atomic((run / kRecoveryFile).string(), "state");
  EXPECT_TRUE(run_has_state(run.string()));
}

TEST(CheckpointHist, CopyFileAtomicGivesAnEqualFileThatOutlivesTheSourcesReplacement) {
  test::TempDir dir("copy");
  write_file_atomic(dir / "a", "first");
  copy_file_atomic(dir / "a", dir / "b");
  write_file_atomic(dir / "a", "second");  // replaced by rename, as every writer here does
  EXPECT_EQ(read_text_file(dir / "b"), "first");
  copy_file_atomic(dir / "a", dir / "b");  // over an existing file
  EXPECT_EQ(read_text_file(dir / "b"), "second");
  EXPECT_THROW(copy_file_atomic(dir / "missing", dir / "c"), Error);
  EXPECT_FALSE(fs::exists(dir / "c"));
  // Across file systems there are no hard links (EXDEV): the copy, chunk by chunk.
  struct stat shm {
  }, tmp{};
  if (::stat("/dev/shm", &shm) == 0 && ::stat(dir.str().c_str(), &tmp) == 0 && shm.st_dev != tmp.st_dev) {
    const std::string src = "/dev/shm/vitcpp_copy_" + std::to_string(::getpid());
    std::string big(9 << 20, 'a');  // over two of the copy's 4 MiB chunks
    big.back() = 'z';
    write_file_atomic(src, big);
    copy_file_atomic(src, dir / "d");
    fs::remove(src);
    EXPECT_EQ(read_text_file(dir / "d"), big);
  } else {
    std::cout << "note: /dev/shm is not another file system here; the copy path was not run\n";
  }
}

// A run directory's history is ranked by the eval top-1 in the files' metadata, best first,
// ties in the order found; all of them when n covers them; the first n with sort off.
TEST(Average, SelectsTheBestByTheirMetadata) {
  test::TempDir dir("avg_select");
  write_model(dir / "checkpoint-1.safetensors", 1, "50");
  write_model(dir / "checkpoint-2.safetensors", 2, "70");
  write_model(dir / "checkpoint-3.safetensors", 3, "60");
  write_model(dir / "checkpoint-4.safetensors", 4, "70");
  auto sel = select_checkpoints({dir.str()}, 3, true);
  EXPECT_EQ(names(sel), "checkpoint-2.safetensors checkpoint-4.safetensors checkpoint-3.safetensors");
  EXPECT_EQ(sel.metric, "eval_top1");
  EXPECT_TRUE(sel.ranked);
  EXPECT_EQ(sel.candidates, 4);
  EXPECT_DOUBLE_EQ(sel.files[2].value, 60);
  EXPECT_EQ(
      names(select_checkpoints({dir.str()}, 10, true)),
      "checkpoint-1.safetensors checkpoint-2.safetensors checkpoint-3.safetensors checkpoint-4.safetensors");
  EXPECT_EQ(names(select_checkpoints({dir / "checkpoint-3.safetensors", dir / "checkpoint-1.safetensors"}, 1,
                                     false)),
            "checkpoint-3.safetensors");
  // A file without the metric: ranking is refused with the way out, taking all is not.
  write_model(dir / "plain.safetensors", 5, "");
  try {
    select_checkpoints({dir.str(), dir / "plain.safetensors"}, 2, true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plain.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--no-sort"), std::string::npos) << e.what();
  }
  EXPECT_EQ(select_checkpoints({dir / "plain.safetensors", dir.str()}, 0, true).files.size(), 5u);
  EXPECT_THROW(select_checkpoints({dir / "nothing.safetensors"}, 0, true), Error);
}

// A run that ranked by its eval loss (--eval-metric loss) says so in each file's "metric":
// the lowest losses are the best.
TEST(Average, RanksByTheMetricTheRunRankedBy) {
  test::TempDir dir("avg_loss");
  const char* losses[] = {"0.5", "0.3", "0.4"};
  for (int i = 0; i < 3; ++i) {
    ViT m(test::tiny_vit());
    save_checkpoint(
        dir / ("checkpoint-" + std::to_string(i + 1) + ".safetensors"), m,
        {{"metric", "eval_loss"}, {"eval_loss", losses[i]}, {"eval_top1", std::to_string(90 + i)}}, false);
  }
  const auto sel = select_checkpoints({dir.str()}, 2, true);
  EXPECT_EQ(sel.metric, "eval_loss");
  EXPECT_TRUE(sel.lower_is_better());
  EXPECT_EQ(names(sel), "checkpoint-2.safetensors checkpoint-3.safetensors");
}

// The mean is summed in double and rounded once: exactly (a + b + c) / 3 in double, to float.
TEST(Average, IsTheMeanInDoubleRoundedOnce) {
  test::TempDir dir("avg_mean");
  for (int i = 0; i < 3; ++i) write_model(dir / ("m" + std::to_string(i) + ".safetensors"), 11 + i, "");
  const Pretrained avg =
      average_checkpoints({dir / "m0.safetensors", dir / "m1.safetensors", dir / "m2.safetensors"});
  std::vector<std::unique_ptr<ViT>> ms;
  for (int i = 0; i < 3; ++i) ms.push_back(load_checkpoint(dir / ("m" + std::to_string(i) + ".safetensors")));
  const int64_t n = avg.model->table().total();
  int64_t bad = 0, first_bad = -1;
  for (int64_t j = 0; j < n; ++j) {
    const double sum = double(ms[0]->params().data()[j]) + double(ms[1]->params().data()[j]) +
                       double(ms[2]->params().data()[j]);
    if (avg.model->params().data()[j] != float(sum / 3.0) && bad++ == 0) first_bad = j;
  }
  EXPECT_EQ(bad, 0) << "first at parameter " << first_bad;
  EXPECT_NE(avg.model->params().data()[0], ms[0]->params().data()[0]);  // not the first file's weights
}

TEST(Average, RefusesAnotherModelOrOtherClasses) {
  test::TempDir dir("avg_bad");
  write_model(dir / "a.safetensors", 1, "");
  write_model(dir / "wide.safetensors", 2, "", test::with_width(test::tiny_vit(), 16, 2, 12));
  try {
    average_checkpoints({dir / "a.safetensors", dir / "wide.safetensors"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[16"), std::string::npos) << e.what();  // the shape that differs
  }
  ViT m(test::tiny_vit());
  save_checkpoint(dir / "cats.safetensors", m, {{"class_names", R"(["cat","dog","eel"])"}}, false);
  save_checkpoint(dir / "cars.safetensors", m, {{"class_names", R"(["car","bus","van"])"}}, false);
  EXPECT_THROW(average_checkpoints({dir / "cats.safetensors", dir / "cars.safetensors"}), Error);
  EXPECT_EQ(average_checkpoints({dir / "a.safetensors", dir / "cats.safetensors"}).class_names,
            (std::vector<std::string>{"cat", "dog", "eel"}));
}

}  // namespace vit
