// PNG and JPEG decoding (libpng, libjpeg-turbo behind vit's error handling), then what a
// dataset does with a decoded image: channel conversion and the model's preprocessing.
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "vit/core/error.h"
#include "vit/data/image.h"
#include "vit/data/preprocess.h"

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
