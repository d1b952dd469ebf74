// ViTConfig::from_json (vitcpp's config.json and checkpoints' vit_config metadata); a
// config that parses must also serialize and parse again to the same JSON.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/config.h"
#include "vit/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vit::ViTConfig c;
  try {
    c = vit::ViTConfig::from_json(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const vit::Error&) {
    return 0;
  }
  const std::string once = c.to_json(-1);
  if (vit::ViTConfig::from_json(once).to_json(-1) != once) std::abort();  // round trip
  return 0;
}
