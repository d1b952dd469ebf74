// The pretrained loader's config.json parsing: the input becomes config.json beside fixed
// timm, Hugging Face or vit-pytorch weights (the first byte picks which; VIT_FUZZ_FIXTURES names
// tests/fixtures/pretrained), then load_pretrained reads the directory.
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "fuzz_util.h"
#include "io/pretrained.h"
#include "vit/core/error.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* fx = std::getenv("VIT_FUZZ_FIXTURES");
  const fs::path src = fx ? fx : VIT_FIXTURE_DIR "/pretrained";
  for (const char* kind : {"timm_a", "hf", "vit_pytorch"}) {
    fs::create_directories(fs::path(vit::fuzz::scratch_dir()) / kind);
    fs::copy_file(src / kind / "model.safetensors",
                  fs::path(vit::fuzz::scratch_dir()) / kind / "model.safetensors",
                  fs::copy_options::overwrite_existing);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string dir = (data[0] & 3) == 2 ? "vit_pytorch" : (data[0] & 1) ? "hf" : "timm_a";
  vit::fuzz::write_scratch(dir + "/config.json", data + 1, size - 1);
  try {
    (void)vit::load_pretrained(vit::fuzz::scratch_dir() + "/" + dir);
  } catch (const vit::Error&) {
  }
  return 0;
}
