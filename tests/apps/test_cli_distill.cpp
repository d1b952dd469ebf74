// vit train --teacher end to end (DeiT's distillation; the loss itself is checked against
// PyTorch in test_torch_fixtures.cpp): a distilled student learns from a teacher run, the
// resumed run continues bit for bit (the teacher is loaded again), and flags that cannot
// work are errors that say why.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/file.h"
#include "support/run_vit.h"
#include "support/same_tensors.h"
#include "support/temp_dir.h"

namespace {
using vit::test::Result;
using vit::test::run;

const std::string kTrain =
    "train --model mnist-seed --img-size 16 --synthetic 128 -b 64 --threads 1 --sched none ";

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

class DistillCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new vit::test::TempDir("distill_cli");
    const Result r = run(kTrain + "--epochs 2 --output " + teacher());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string teacher() { return *dir_ / "teacher"; }
  static vit::test::TempDir* dir_;
};
vit::test::TempDir* DistillCli::dir_ = nullptr;

TEST_F(DistillCli, AStudentLearnsFromATeacherAndResumesExactly) {
  const std::string whole = *dir_ / "whole", part = *dir_ / "part";
  const std::string student = kTrain + "--distilled --teacher " + teacher() + " --distillation-type soft ";
  Result r = run(student + "--epochs 2 --output " + whole);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "soft distillation, alpha 0.5")) << r.out;
  EXPECT_TRUE(has(r.out, "into the distillation token's head")) << r.out;
  // Another loss than without the teacher: the first epoch's training loss differs.
  r = run(kTrain + "--distilled --epochs 1 --output " + (*dir_ / "alone"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string with = vit::read_text_file(whole + "/summary.csv"),
                    alone = vit::read_text_file(*dir_ / "alone/summary.csv");
  EXPECT_NE(with.substr(with.find("\n1,"), 20), alone.substr(alone.find("\n1,"), 20)) << with << alone;
  // One epoch, then --resume to two: the teacher comes back from args.json, the weights are
  // the uninterrupted run's.
  ASSERT_EQ(run(student + "--epochs 1 --output " + part).code, 0);
  r = run("train --resume " + part + " --epochs 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "loading the teacher from " + teacher())) << r.out;
  vit::test::expect_same_tensors(whole + "/last.safetensors", part + "/last.safetensors");
}

// A teacher file replaced between the run and its resume is refused: the run would go on
// learning from other logits, not the uninterrupted run's.
TEST_F(DistillCli, AResumeWithAReplacedTeacherIsRefused) {
  const std::string own = *dir_ / "own_teacher", other = *dir_ / "other_teacher",
                    run_dir = *dir_ / "replaced";
  std::filesystem::copy(teacher(), own);
  ASSERT_EQ(run(kTrain + "--epochs 1 --seed 9 --output " + other).code, 0);
  ASSERT_EQ(run(kTrain + "--teacher " + own + " --epochs 1 --output " + run_dir).code, 0);
  std::filesystem::copy_file(other + "/best.safetensors", own + "/best.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  const Result r = run("train --resume " + run_dir + " --epochs 2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "--teacher holds other weights than the teacher the run distilled from")) << r.out;
}

// Without a distillation token the teacher's predictions go into the class head (plain
// knowledge distillation).
TEST_F(DistillCli, AModelWithoutADistillationTokenDistillsIntoItsClassHead) {
  const Result r = run(kTrain + "--teacher " + teacher() + " --epochs 1 --output " + (*dir_ / "plain"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "hard distillation, alpha 0.5, into the class head")) << r.out;
}

TEST_F(DistillCli, WhatCannotWorkIsRefused) {
  Result r = run(kTrain + "--distillation-alpha 0.3 --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "--distillation-alpha needs --teacher")) << r.out;
  r = run(kTrain + "--teacher " + teacher() + " --distillation-alpha 1.5 --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "distillation alpha must be in [0, 1], got 1.5")) << r.out;
  const std::string out = *dir_ / "refused";
  r = run(kTrain + "--teacher " + teacher() + " --num-classes 7 --epochs 1 --output " + out);
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "the teacher has 10 classes, the model 7")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out)) << "refused before the run directory is made";
  r = run(kTrain + "--teacher " + teacher() + " --in-chans 3 --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "the teacher takes 1x16x16 images, the model 3x16x16")) << r.out;
  // The teacher is loaded at the student's input size: a size smaller than its patch (4) is
  // said as that, not as a fault of the teacher's file.
  r = run(kTrain + "--teacher " + teacher() + " --img-size 3 --patch-size 1 --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "--teacher " + teacher() + " at the student's input size 3x3")) << r.out;
  EXPECT_TRUE(has(r.out, "smaller than one patch")) << r.out;
  r = run(kTrain + "--teacher /nonexistent-teacher --epochs 1");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "/nonexistent-teacher")) << r.out;
  EXPECT_FALSE(has(r.out, "input size")) << "a missing file is no size problem: " << r.out;
}

}  // namespace
