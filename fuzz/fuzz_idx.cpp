// read_idx on an images file and a labels file (plain or gzip): the first two input bytes
// say how many of the rest go to the labels file.
#include <cstdint>

#include "data/idx.h"
#include "fuzz_util.h"
#include "vit/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t labels = (size_t(data[0]) << 8 | data[1]) % (size - 1);
  data += 2;
  size -= 2;
  const std::string lab = vit::fuzz::write_scratch("labels-idx1-ubyte", data, labels);
  const std::string img = vit::fuzz::write_scratch("images-idx3-ubyte", data + labels, size - labels);
  try {
    (void)vit::read_idx(img, lab, 10);
  } catch (const vit::Error&) {
  }
  return 0;
}
