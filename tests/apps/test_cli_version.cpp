// `vit --version` reports the one version in CMakeLists.txt's project(), as the library does.
#include <gtest/gtest.h>

#include <string>

#include "support/run_vit.h"
#include "vit/core/version.h"

TEST(CliVersion, VersionIsTheProjectsVersion) {
  const vit::test::Result r = vit::test::run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("vitcpp ") + VIT_VERSION + "\n");
  EXPECT_STREQ(vit::version(), VIT_VERSION);
}
