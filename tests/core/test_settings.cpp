// The environment variables: one table (core/settings.h) that README.md shows row for row,
// one reader of the environment in the library and the vit program, and names outside the
// table refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "vit/core/error.h"
#include "vit/core/settings.h"

namespace {
namespace fs = std::filesystem;
const fs::path kRoot = fs::path(VIT_FIXTURE_DIR).parent_path().parent_path();

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST(Settings, ReadmeShowsTheTableRowForRow) {
  const std::string readme = read_all(kRoot / "README.md");
  std::string want, missing;
  for (const vit::Setting& s : vit::settings()) {
    const std::string row =
        std::string("| `") + s.name + "` | " + s.values + " | " + s.default_text + " | " + s.effect + " |\n";
    want += row;
    if (readme.find(row) == std::string::npos) missing += row;
  }
  EXPECT_TRUE(missing.empty()) << "README.md lacks these rows of core/settings.cpp's table:\n"
                               << missing << "the whole table:\n"
                               << want;
}

TEST(Settings, OnlyTheSettingsFileReadsTheEnvironment) {
  std::string callers;
  for (const char* dir : {"src", "apps", "include"})
    for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
      if (!e.is_regular_file() || e.path().filename() == "settings.cpp") continue;
      if (read_all(e.path()).find("getenv(") != std::string::npos) callers += e.path().string() + "\n";
    }
  EXPECT_TRUE(callers.empty()) << "getenv outside src/core/settings.cpp (use vit::setting):\n" << callers;
}

TEST(Settings, UnsetOrEmptyIsNullAndUnknownNamesThrow) {
  setenv("VIT_PACK", "", 1);
  EXPECT_EQ(vit::setting("VIT_PACK"), nullptr);
  setenv("VIT_PACK", "off", 1);
  EXPECT_STREQ(vit::setting("VIT_PACK"), "off");
  unsetenv("VIT_PACK");
  EXPECT_EQ(vit::setting("VIT_PACK"), nullptr);
  EXPECT_THROW(vit::setting("VIT_NO_SUCH_THING"), vit::Error);
}
