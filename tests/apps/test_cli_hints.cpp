// Flag mistakes as a user meets them: the program's name in usage lines, "did you mean" for a
// misspelt subcommand or flag, and under an MPI launcher one report, from rank 0.
#include <gtest/gtest.h>

#include <string>

#include "support/run_vit.h"

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
  r = run_vit("train --epoch 1 --synthetic 8");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("vit train: --epoch: did you mean --epochs?"), std::string::npos) << r.out;
  r = run_vit("info --modle vit-base-16");
  EXPECT_NE(r.out.find("vit info: --modle: did you mean --model?"), std::string::npos) << r.out;
  r = run_vit("info --zzzzzzzz 1");  // nothing near: no guess
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
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
