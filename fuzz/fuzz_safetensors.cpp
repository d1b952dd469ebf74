// SafeTensors::parse on any bytes: the header (length, JSON, dtypes, shapes, offsets) and,
// when it parses, the body: every tensor converted to float.
#include <cstdint>
#include <vector>

#include "io/safetensors.h"
#include "vit/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vit::SafeTensors st =
        vit::SafeTensors::parse(std::vector<char>(data, data + size), "fuzz.safetensors");
    for (const auto& t : st.tensors()) {
      try {
        (void)st.to_float(t.name);
      } catch (const vit::Error&) {  // e.g. a dtype with no float conversion
      }
    }
  } catch (const vit::Error&) {
  }
  return 0;
}
