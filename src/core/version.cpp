#include "vit/core/version.h"

namespace vit {

const char* version() {
  return VIT_VERSION;  // CMakeLists.txt: PROJECT_VERSION
}

}  // namespace vit
