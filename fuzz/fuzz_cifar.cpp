// CIFAR-10 and CIFAR-100 binary batches (records of label byte(s) + 3072 pixels).
#include <cstdint>

#include "data/cifar.h"
#include "fuzz_util.h"
#include "vit/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = vit::fuzz::write_scratch("batch.bin", data, size);
  try {
    (void)vit::read_cifar10({path});
  } catch (const vit::Error&) {
  }
  for (bool fine : {true, false}) {
    try {
      (void)vit::read_cifar100(path, fine);
    } catch (const vit::Error&) {
    }
  }
  return 0;
}
