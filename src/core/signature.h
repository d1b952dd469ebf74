// What kind of image a file's first bytes say it is, for the image decoder (data/image.cpp)
// and for a checkpoint reader handed an image (io/safetensors.cpp): one place for the magic.
#pragma once
#include <string_view>

namespace vit {

// "PNG" or "JPEG" when bytes start as such a file does (the first 8 or 3 bytes decide), else "".
inline std::string_view image_signature(std::string_view bytes) {
  if (bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return "PNG";
  if (bytes.substr(0, 3) == "\xFF\xD8\xFF") return "JPEG";
  return "";
}

}  // namespace vit
