// The environment variables: one table (core/settings.h) that docs/environment.md shows row for row,
// one reader of the environment in the library and the vit program, and names outside the
// table refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/settings.h"

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

TEST(Settings, TheDocsShowTheTableRowForRow) {
  const std::string readme = read_all(kRoot / "docs" / "environment.md");
  std::string want, missing;
  for (const vit::Setting& s : vit::settings()) {
    const std::string row =
        std::string("| `") + s.name + "` | " + s.values + " | " + s.default_text + " | " + s.effect + " |\n";
    want += row;
    if (readme.find(row) == std::string::npos) missing += row;
  }
  EXPECT_TRUE(missing.empty()) << "docs/environment.md lacks these rows of core/settings.cpp's table:\n"
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

namespace {
// Sets `name` to `value` for one scope, then puts back what was there (scripts/test_isa.sh
// runs these tests with VIT_ISA set).
struct Env {
  std::string name;
  std::optional<std::string> before;
  Env(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) before = v;
    setenv(n, value, 1);
  }
  ~Env() { before ? (void)setenv(name.c_str(), before->c_str(), 1) : (void)unsetenv(name.c_str()); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const vit::Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(Settings, ChoicesTakeTheTableWordsAndNameAnythingElse) {
  EXPECT_EQ(vit::setting_choice("VIT_TILED"), "");
  {
    Env e("VIT_TILED", "on");
    EXPECT_EQ(vit::setting_choice("VIT_TILED"), "on");
  }
  {
    Env e("VIT_BIND", "auto");
    EXPECT_EQ(vit::setting_choice("VIT_BIND"), "auto");
  }
  {
    Env e("VIT_TILED", "onn");
    EXPECT_EQ(error_of([] { vit::setting_choice("VIT_TILED"); }),
              "VIT_TILED=onn: unknown; one of on, off (did you mean on?)");
  }
  {
    Env e("VIT_PACK", "yes");  // nothing near: no guess
    EXPECT_EQ(error_of([] { vit::setting_choice("VIT_PACK"); }), "VIT_PACK=yes: unknown; one of on, off");
  }
  {
    Env e("VIT_CLS_TAIL", "ON");  // words are matched as written, as docs/environment.md gives them
    EXPECT_EQ(error_of([] { vit::setting_choice("VIT_CLS_TAIL"); }),
              "VIT_CLS_TAIL=ON: unknown; one of on, off (did you mean on?)");
  }
}

TEST(Settings, CountsSecondsAndSizesAreWholeValues) {
  EXPECT_FALSE(vit::setting_count("VIT_SHARDS").has_value());
  // 0x10 is no decimal (strtod took it as 16, where the flags refuse it).
  for (const char* bad : {"abc", "0", "-2", "3x", "2.5", "1e30", "0x10"}) {
    Env e("VIT_SHARDS", bad);
    EXPECT_EQ(error_of([] { vit::setting_count("VIT_SHARDS"); }),
              std::string("VIT_SHARDS=") + bad + ": not a count (a whole number, 1 to 10^9)");
  }
  {
    Env e("VIT_SHARDS", "4");
    EXPECT_EQ(vit::setting_count("VIT_SHARDS"), 4);
  }
  for (const char* bad : {"soon", "-1", "10s", "inf", "nan"}) {
    Env e("VIT_COMM_TIMEOUT", bad);
    EXPECT_EQ(error_of([] { vit::setting_seconds("VIT_COMM_TIMEOUT"); }),
              std::string("VIT_COMM_TIMEOUT=") + bad + ": not a number of seconds (0 or more)");
  }
  for (const char* good : {"0", "2.5", "600"}) {
    Env e("VIT_COMM_TIMEOUT", good);
    EXPECT_EQ(vit::setting_seconds("VIT_COMM_TIMEOUT"), std::atof(good));
  }
  // Less than a byte was 0, which checks nothing: a tiny limit turned the check off.
  for (const char* bad : {"0.5", "0x10"}) {
    Env e("VIT_MEMORY_LIMIT", bad);
    EXPECT_NE(
        error_of([] { vit::setting_bytes("VIT_MEMORY_LIMIT"); }).find(std::string("VIT_MEMORY_LIMIT=") + bad),
        std::string::npos);
  }
  {
    Env e("VIT_MEMORY_LIMIT", "1.5k");
    EXPECT_EQ(vit::setting_bytes("VIT_MEMORY_LIMIT"), size_t(1536));
  }
  {
    Env e("VIT_MEMORY_LIMIT", "3T");
    EXPECT_EQ(vit::setting_bytes("VIT_MEMORY_LIMIT"), size_t(3) << 40);
  }
  {
    Env e("VIT_MEMORY_LIMIT", "8GB");
    EXPECT_EQ(error_of([] { vit::setting_bytes("VIT_MEMORY_LIMIT"); }),
              "VIT_MEMORY_LIMIT=8GB: unknown unit 'GB' (use K, M, G or T)");
  }
  {
    Env e("VIT_MEMORY_LIMIT", "-1G");
    EXPECT_EQ(error_of([] { vit::setting_bytes("VIT_MEMORY_LIMIT"); }),
              "VIT_MEMORY_LIMIT=-1G: not a size (e.g. 512M, 8G)");
  }
  // A reader of one kind asked for a variable of another is the program's mistake.
  EXPECT_NE(error_of([] { vit::setting_count("VIT_TILED"); }).find("another kind"), std::string::npos);
}

// Every variable of vitcpp's own is checked up front, each with a value it cannot take; the
// others (read by OpenMP, oneDNN, launchers) are theirs to judge.
TEST(Settings, CheckSettingsRefusesEachOwnVariableAndLeavesOthersAlone) {
  EXPECT_NO_THROW(vit::check_settings());
  int own = 0;
  for (const vit::Setting& s : vit::settings()) {
    if (s.kind == vit::SettingKind::other) {
      Env e(s.name, "no such value");
      EXPECT_NO_THROW(vit::check_settings()) << s.name;
      continue;
    }
    ++own;
    Env e(s.name, "no such value");
    EXPECT_EQ(error_of([] { vit::check_settings(); }).rfind(std::string(s.name) + "=no such value: ", 0), 0u)
        << s.name;
  }
  EXPECT_EQ(own, 9) << "VIT_ISA, PACK, TILED, SHARDS, CLS_TAIL, MEMORY_LIMIT, COMM_TIMEOUT, BIND, "
                       "MAX_IMAGE_PIXELS";
}

TEST(Settings, MisspeltNamesAreNamedWithTheNearestOne) {
  Env a("VIT_TILE", "on"), b("VIT_SOMETHING_ELSE", "1"), c("VIT_TILED", "on"), d("VIT_BINDS", "on"),
      e("VIT_TEST_ISA", "0"), f("VIT_SIMD", "off");
  auto got = vit::misspelt_settings();
  std::sort(got.begin(), got.end());
  using Named = std::pair<std::string, std::string>;
  EXPECT_EQ(got, (std::vector<Named>{{"VIT_BINDS", "did you mean VIT_BIND?"},
                                     {"VIT_SIMD", "VIT_ISA replaced it: VIT_ISA=generic for VIT_SIMD=off"},
                                     {"VIT_TILE", "did you mean VIT_TILED?"}}));
}
