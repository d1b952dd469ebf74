// The installed package end to end (label `install`): `cmake --install` to a temporary
// prefix, examples/classify (C++) and examples/classify_c (C) configured and built from that
// prefix alone (find_package(vitcpp)), the C example also built by hand with
// `cc $(pkg-config --cflags --libs vitcpp)`, and all three print `vit predict`'s top-5 (the
// same indices, probabilities within 1e-4: they print 4 decimals) for a small model trained
// here and for a ViT-Ti exported in timm's layout.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"
#include "support/run_vit.h"
#include "support/temp_dir.h"

namespace {

using vit::test::Result;
using vit::test::run_vit;

// Runs a shell command, stdout and stderr together.
Result sh(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  const int status = pclose(p.release());
  return {WEXITSTATUS(status), out};
}

struct Top {
  int64_t index;
  double prob;
};

// `vit predict --json`'s top-k of one image.
std::vector<Top> predict(const std::string& checkpoint, const std::string& image, std::string* log) {
  const Result r = run_vit("predict --checkpoint " + checkpoint + " " + image + " --topk 5 --json");
  EXPECT_EQ(r.code, 0) << r.out;
  *log = r.out;
  std::vector<Top> out;
  std::istringstream is(r.out);
  for (std::string line; std::getline(is, line);)  // the JSON line, not the loader's notes
    if (r.code == 0 && !line.empty() && line[0] == '{') {
      const nlohmann::json j = nlohmann::json::parse(line);
      for (const auto& t : j["topk"]) out.push_back({t["index"].get<int64_t>(), t["prob"].get<double>()});
    }
  return out;
}

// A classify example's lines "index probability [label]".
std::vector<Top> parse(const std::string& text) {
  std::vector<Top> out;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) {
    std::istringstream ls(line);
    Top t{};
    if (ls >> t.index >> t.prob) out.push_back(t);
  }
  return out;
}

void expect_same_top(const std::vector<Top>& got, const std::vector<Top>& want, const std::string& who) {
  ASSERT_EQ(got.size(), want.size()) << who;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].index, want[i].index) << who << ": rank " << i;
    if (std::abs(got[i].prob - want[i].prob) > worst) worst = std::abs(got[i].prob - want[i].prob), at = i;
  }
  EXPECT_LE(worst, 1e-4) << who << ": worst probability at rank " << at << ": " << got[at].prob
                         << " vs vit predict's " << want[at].prob;
}

TEST(Install, ExamplesBuiltFromThePrefixPrintVitPredictsTop5) {
  vit::test::TempDir tmp("install");
  const std::string prefix = tmp / "prefix", cmake = VIT_CMAKE;
  Result r = sh(cmake + " --install " + VIT_BUILD_DIR + " --prefix " + prefix);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* f :
       {"/include/vitcpp.h", "/include/vit/classifier.h", "/lib/cmake/vitcpp/vitcppConfig.cmake",
        "/lib/cmake/vitcpp/vitcppConfigVersion.cmake", "/lib/pkgconfig/vitcpp.pc", "/bin/vit"})
    EXPECT_TRUE(std::filesystem::exists(prefix + f)) << f;
  // include/ holds exactly what is installed: the public API, none of the engine's own headers
  // (those live beside their sources under src/).
  auto headers = [](const std::string& dir) {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file()) out.insert(std::filesystem::relative(e.path(), dir).string());
    return out;
  };
  EXPECT_EQ(headers(std::string(VIT_SOURCE_DIR) + "/include"), headers(prefix + "/include"));

  // Each example from the prefix alone: nothing of the source tree but the example's folder.
  // With clang++ too where it is installed (scripts/setup.sh --fuzz): clang 14 defaults to
  // C++14, so this checks that the package asks for the C++17 the headers need.
  std::vector<std::pair<std::string, std::string>> programs;
  std::vector<std::pair<std::string, std::string>> builds = {{"classify", ""}, {"classify_c", ""}};
  if (sh("command -v clang++").code == 0) builds.push_back({"classify", "clang++"});
  for (const auto& [ex, cxx] : builds) {
    const std::string build = tmp / ("build-" + ex + (cxx.empty() ? "" : "-" + cxx));
    r = sh(cmake + " -S " + VIT_SOURCE_DIR + "/examples/" + ex + " -B " + build +
           " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + prefix +
           (cxx.empty() ? "" : " -DCMAKE_CXX_COMPILER=" + cxx) + " && " + cmake + " --build " + build);
    ASSERT_EQ(r.code, 0) << ex << " " << cxx << ":\n" << r.out;
    programs.push_back({ex + (cxx.empty() ? "" : " (" + cxx + ")"), build + "/" + ex});
  }
  // The C example by hand, with what pkg-config says and nothing else.
  r = sh("cc " + std::string(VIT_SOURCE_DIR) + "/examples/classify_c/classify.c -o " + (tmp / "classify_pc") +
         " $(PKG_CONFIG_PATH=" + prefix + "/lib/pkgconfig pkg-config --cflags --libs vitcpp)");
  ASSERT_EQ(r.code, 0) << "cc with pkg-config:\n" << r.out;
  programs.push_back({"classify_c (pkg-config)", tmp / "classify_pc"});
  // A shared libvitcpp (-DBUILD_SHARED_LIBS=ON) is found at run time from the prefix: CMake's
  // builds carry its path, the one built by hand does not.
  const std::string run_env = "LD_LIBRARY_PATH=" + prefix + "/lib ";

  // (a) a small model trained on synthetic digits-sized images; (b) ViT-Ti/16 after one step
  // (a trained head: its logits are not all equal), exported in timm's layout.
  r = run_vit("train --model mnist-seed --synthetic 256 --epochs 1 -b 64 --log-every 0 --output " +
              (tmp / "mnist"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_vit("train --model vit_tiny_patch16_224 --synthetic 10 --epochs 1 -b 8 --log-every 0 --output " +
              (tmp / "ti"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_vit("export --checkpoint " + (tmp / "ti") + " --out " + (tmp / "ti_timm"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string fixtures = VIT_FIXTURE_DIR;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {tmp / "mnist", fixtures + "/digit_7.png"},
      {tmp / "ti_timm", fixtures + "/pretrained/images/cat.jpg"},
  };
  for (const auto& [checkpoint, image] : cases) {
    std::string log;
    const std::vector<Top> want = predict(checkpoint, image, &log);
    ASSERT_EQ(want.size(), 5u) << checkpoint << ": vit predict printed\n" << log;
    for (const auto& [name, program] : programs) {
      r = sh(run_env + program + " " + checkpoint + " " + image + " 5");
      ASSERT_EQ(r.code, 0) << name << ":\n" << r.out;
      expect_same_top(parse(r.out), want, name + " on " + checkpoint);
    }
  }
  // A bad image is one line on stderr and a failing exit status, in both languages.
  for (const auto& [name, program] : programs) {
    r = sh(run_env + program + " " + (tmp / "mnist") + " /nonexistent.png");
    EXPECT_EQ(r.code, 1) << name;
    EXPECT_NE(r.out.find("/nonexistent.png"), std::string::npos) << name << ": " << r.out;
  }
}

}  // namespace

// A shared libvitcpp exports the public API and nothing else (docs/design.md, "The installed
// library"): every C function vitcpp.h declares (one without VIT_API links in the static
// build, and not against the shared one), vit::Classifier, top_k, version, print_error_line
// and vit::Error's type information; none of the engine's classes (they may change without
// breaking programs). Runs in a build with -DBUILD_SHARED_LIBS=ON (scripts/test_shared.sh).
TEST(Install, ASharedLibraryExportsThePublicApiAlone) {
  const std::string so = std::string(VIT_BUILD_DIR) + "/libvitcpp.so";
  if (!std::filesystem::exists(so))
    GTEST_SKIP() << "a static build: scripts/test_shared.sh builds the shared one";
  const Result nm = sh("nm -D --defined-only -C " + so);
  ASSERT_EQ(nm.code, 0) << nm.out;
  std::set<std::string> exported, stray;
  const std::regex pub(
      R"(^(vitcpp_\w+|vit::Classifier::.*|vit::top_k\(.*|vit::version\(\)|vit::print_error_line\(.*|(typeinfo|typeinfo name|vtable) for vit::Error)$)");
  std::istringstream lines(nm.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t type = line.find(' ');  // "ADDRESS TYPE NAME"
    if (type == std::string::npos || line.size() < type + 3) continue;
    const std::string name = line.substr(type + 3);
    exported.insert(name);
    if (!std::regex_match(name, pub)) stray.insert(name);
  }
  std::string strays;
  for (const std::string& s : stray) strays += "\n  " + s;
  EXPECT_TRUE(stray.empty()) << stray.size() << " symbols beyond the public API:" << strays;
  // Each function declaration of the header (a line that starts with its return type, VIT_API
  // or not: one without it is the bug to find), exported.
  std::ifstream header(std::string(VIT_SOURCE_DIR) + "/include/vitcpp.h");
  const std::regex declared(R"(^(VIT_API\s+)?(const\s+)?\w+[\s*]+(vitcpp_\w+)\s*\()");
  int64_t functions = 0;
  std::smatch m;
  for (std::string line; std::getline(header, line);)
    if (std::regex_search(line, m, declared)) {
      ++functions;
      EXPECT_TRUE(m[1].matched) << m[3].str() << " is declared in vitcpp.h without VIT_API";
      EXPECT_TRUE(exported.count(m[3].str())) << m[3].str() << " is declared in vitcpp.h, not exported";
    }
  EXPECT_GE(functions, 24) << "the header's functions were not found";
  std::cout << exported.size() << " exported symbols, " << functions << " C functions\n";
}

// docs/embedding.md shows both examples whole (after their header comment), as they are.
TEST(Install, TheGuideShowsTheExamplesAsTheyAre) {
  const std::string src = VIT_SOURCE_DIR, guide = vit::read_text_file(src + "/docs/embedding.md");
  for (const char* ex : {"/examples/classify/classify.cpp", "/examples/classify_c/classify.c"}) {
    std::string text = vit::read_text_file(src + ex);
    // The header comment: the lines up to the first #include.
    text = text.substr(text.find("#include"));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_NE(guide.find(text), std::string::npos) << ex << " differs from its copy in docs/embedding.md";
  }
}
