// Shared by the libFuzzer harnesses: a private scratch directory for parsers that read
// files, and the harnesses' contract. A parser given any bytes must either succeed or throw
// vit::Error; any other exception, a crash or a sanitizer report is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace vit::fuzz {

// A directory of this process's own (under $TMPDIR or /tmp), made on first use.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/vitcpp_fuzz_XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    return tmpl;
  }();
  return dir;
}

// The fixture tests/fixtures/pretrained/NAME (VIT_FUZZ_FIXTURES names another pretrained
// folder) as a Classifier, for the harnesses of vit serve's requests.
inline std::string fixture(const std::string& name) {
  const char* fx = std::getenv("VIT_FUZZ_FIXTURES");
  return std::string(fx ? fx : VIT_FIXTURE_DIR "/pretrained") + "/" + name;
}

inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

}  // namespace vit::fuzz
