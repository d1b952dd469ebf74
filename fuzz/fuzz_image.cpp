// PNG and JPEG decoding (libpng, libjpeg-turbo behind vit's error handling), then what a
// dataset does with a decoded image: channel conversion and the model's preprocessing.
#include <cstdint>
#include <vector>

#include "data/image.h"
#include "data/preprocess.h"
#include "fuzz_util.h"
#include "vit/core/error.h"

// Headers claiming more than 4M pixels are refused (vit::set_max_image_pixels), so that a
// legal size stays inside libFuzzer's 2 GB: at the default limit (179M pixels) the float
// planes preprocessing makes would need 2 GB alone. What the limit itself does is tested in
// tests/data/test_image.cpp.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vit::set_max_image_pixels(int64_t(1) << 22);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = vit::fuzz::write_scratch("image", data, size);
  try {
    const vit::Image img = vit::read_image(path);
    (void)vit::convert_channels(img, 3);
    vit::InputSpec in{3, 8, 8, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}, "bicubic", 0.875f, "center"};
    std::vector<float> out(3 * 8 * 8);
    vit::preprocess_image(img, in, out.data());
  } catch (const vit::Error&) {
  }
  return 0;
}
