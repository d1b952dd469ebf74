// Flag mistakes as a user meets them: the program's name in usage lines, "did you mean" for a
// misspelt subcommand or flag, and under an MPI launcher one report, from rank 0. And vit
// predict on folders with a results file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/run_vit.h"
#include "support/temp_dir.h"

using vit::test::Result;
using vit::test::run_vit;

TEST(CliHints, UsageNamesTheProgram) {
  EXPECT_NE(run_vit("--help").out.find("Usage: vit [OPTIONS] SUBCOMMAND"), std::string::npos);
  EXPECT_NE(run_vit("train --help").out.find("Usage: vit train [OPTIONS]"), std::string::npos);
}

TEST(CliHints, MisspeltSubcommandsAndFlagsGetTheNearestName) {
  Result r = run_vit("trian");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("vit: 'trian' is not a subcommand; did you mean 'vit train'?"), std::string::npos)
      << r.out;
  // A word near none of them lists them (it said only "A subcommand is required").
  r = run_vit("bogus");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("vit: 'bogus' is not a subcommand; the subcommands: train, "), std::string::npos)
      << r.out;
  r = run_vit("train --epoch 1 --synthetic 8");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("vit train: --epoch: did you mean --epochs?"), std::string::npos) << r.out;
  r = run_vit("info --modle vit-base-16");
  EXPECT_NE(r.out.find("vit info: --modle: did you mean --model?"), std::string::npos) << r.out;
  r = run_vit("info --zzzzzzzz 1");  // nothing near: no guess, but the flag is named
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vit info: --zzzzzzzz: not a flag of vit info"), std::string::npos) << r.out;
  // A flag cut short, and timm's names for vit's flags; an unknown flag is named even where
  // CLI11 stops at a missing required one first.
  for (const auto& [line, hint] : std::vector<std::pair<std::string, std::string>>{
           {"train --batch 1", "vit train: --batch: did you mean --batch-size?"},
           {"train --initial-checkpoint x",
            "vit train: --initial-checkpoint: did you mean --pretrained (timm's"},
           {"train --log-freq 5", "vit train: --log-freq: did you mean --log-interval (timm's --log-freq)?"},
           {"eval --log-freq 5", "vit eval: --log-freq: did you mean --log-seconds (timm's --log-freq)?"},
           // timm's name before a near spelling (--gp was "did you mean --amp?").
           {"train --gp avg", "vit train: --gp: did you mean --pool (timm's --gp)?"},
           {"train --drop-connect 0.1",
            "vit train: --drop-connect: did you mean --drop-path (timm's --drop-connect)?"},
           {"train --head-only", "vit train: --head-only: did you mean --freeze-backbone (a linear probe)?"},
           {"eval --val-split validation",
            "vit eval: --val-split: did you mean --split (timm's --val-split)?"}}) {
    r = run_vit(line);
    EXPECT_NE(r.code, 0) << line;
    EXPECT_NE(r.out.find(hint), std::string::npos) << line << ": " << r.out;
  }
}

// Environment variables as flags are: a value vitcpp cannot use stops the program before any
// work with one line naming it, and a VIT_ name it does not read gets a note with the nearest.
TEST(CliHints, BadSettingsStopAndMisspeltNamesGetANote) {
  Result r = run_vit("info --model mnist-seed", "VIT_TILED=onn");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "vit: error: VIT_TILED=onn: unknown; one of on, off (did you mean on?)\n");
  r = run_vit("train --synthetic 8 --epochs 1", "VIT_SHARDS=two");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "vit: error: VIT_SHARDS=two: not a count (a whole number, 1 to 10^9)\n");
  r = run_vit("info --model mnist-seed", "VIT_TILE=on");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("vit: note: VIT_TILE is set, but vitcpp reads no such variable (did you mean "
                        "VIT_TILED?)\n",
                        0),
            0u)
      << r.out;
  r = run_vit("info --model mnist-seed", "VIT_TILE=on PMI_RANK=1");  // rank 0 alone says so
  EXPECT_EQ(r.out.find("VIT_TILE"), std::string::npos) << r.out;
}

TEST(CliHints, UnderMpiOnlyRankZeroReportsAFlagError) {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    Result other = run_vit("train --epoch 1", std::string("env ") + var + "=1");
    EXPECT_NE(other.code, 0) << var;
    EXPECT_EQ(other.out, "") << var << ": rank 1 stays silent";
    Result root = run_vit("train --epoch 1", std::string("env ") + var + "=0");
    EXPECT_EQ(root.code, other.code) << var;
    EXPECT_NE(root.out.find("--epoch"), std::string::npos) << var << ": " << root.out;
  }
}

// vit predict on a folder: its images at any depth in timm's natural order (Img1, img2, img10;
// it was byte order: Img1, img10, img2), the same predictions as the files given one by one;
// --results-file writes timm inference.py's columns, the file names (paths with --fullname).
TEST(CliPredict, FoldersAndAResultsFile) {
  vit::test::TempDir tmp("predict_dir");
  const std::string d = tmp.str();
  Result train =
      run_vit("train --threads 1 --model mnist-seed --synthetic 32 --epochs 1 -b 16 --output " + d + "/run");
  ASSERT_EQ(train.code, 0) << train.out;
  std::filesystem::create_directories(d + "/imgs/sub");
  const std::string digit = std::string(VIT_FIXTURE_DIR) + "/digit_7.png";
  for (const char* name : {"/imgs/img10.png", "/imgs/img2.png", "/imgs/Img1.png", "/imgs/sub/c.PNG"})
    std::filesystem::copy_file(digit, d + name);
  std::ofstream(d + "/imgs/notes.txt") << "not an image\n";
  const std::string ck = " --checkpoint " + d + "/run ";
  Result folder = run_vit("predict --topk 3" + ck + d + "/imgs --results-file " + d + "/preds.csv");
  ASSERT_EQ(folder.code, 0) << folder.out;
  std::string in_order;
  for (const char* name : {"/imgs/Img1.png", "/imgs/img2.png", "/imgs/img10.png", "/imgs/sub/c.PNG"})
    in_order += std::string(" ") + d + name;
  Result files = run_vit("predict --topk 3" + ck + in_order);
  ASSERT_EQ(files.code, 0) << files.out;
  EXPECT_EQ(folder.out, files.out);
  auto names_in = [](const std::string& path) {
    std::ifstream csv(path);
    std::string header, row, names;
    std::getline(csv, header);
    EXPECT_EQ(header, "filename,index_0,index_1,index_2,label_0,label_1,label_2,prob_0,prob_1,prob_2");
    while (std::getline(csv, row)) {
      EXPECT_EQ(std::count(row.begin(), row.end(), ','), 9) << row;
      names += row.substr(0, row.find(',')) + " ";
    }
    return names;
  };
  EXPECT_EQ(names_in(d + "/preds.csv"), "Img1.png img2.png img10.png c.PNG ");
  ASSERT_EQ(run_vit("predict --topk 3 --fullname" + ck + d + "/imgs --results-file " + d + "/full.csv").code,
            0);
  EXPECT_EQ(names_in(d + "/full.csv"), in_order.substr(1) + " ");
  EXPECT_NE(run_vit("predict --fullname" + ck + d + "/imgs").out.find("--fullname requires --results-file"),
            std::string::npos);
  // Progress as timm's inference.py logs it: lines with --progress log, none by default on
  // a pipe (the results' stream).
  EXPECT_EQ(folder.out.find("predict "), std::string::npos) << folder.out;
  Result logged = run_vit("predict --topk 3 -b 2 --progress log --log-seconds 0.000001" + ck + d + "/imgs");
  ASSERT_EQ(logged.code, 0) << logged.out;
  EXPECT_NE(logged.out.find("predict 4/4 images "), std::string::npos) << logged.out;
  // A .json name gets JSON lines of the same columns (timm's --results-format json).
  ASSERT_EQ(run_vit("predict --topk 3" + ck + d + "/imgs --results-file " + d + "/preds.json").code, 0);
  std::ifstream jl(d + "/preds.json");
  int rows = 0;
  std::string row;
  while (std::getline(jl, row)) {
    const auto j = nlohmann::json::parse(row);
    EXPECT_EQ(j.size(), 10u) << row;
    EXPECT_TRUE(j.contains("filename") && j.contains("label_2") && j.contains("prob_0")) << row;
    if (rows == 0) {
      EXPECT_EQ(j["filename"], "Img1.png") << row;
    }
    EXPECT_EQ(row.rfind("{\"filename\":", 0), 0u) << row;
    ++rows;
  }
  EXPECT_EQ(rows, 4);
  // A linked folder is walked into, as train and eval walk image folders (it was skipped).
  std::filesystem::create_directories(d + "/elsewhere");
  std::filesystem::copy_file(digit, d + "/elsewhere/z.png");
  std::filesystem::create_directory_symlink(d + "/elsewhere", d + "/imgs/linked");
  Result linked = run_vit("predict --topk 3" + ck + d + "/imgs");
  ASSERT_EQ(linked.code, 0) << linked.out;
  EXPECT_NE(linked.out.find("imgs/linked/z.png"), std::string::npos) << linked.out;
}
