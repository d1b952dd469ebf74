// vitcpp's version: the one in CMakeLists.txt's project(), which `vit --version`, the
// checkpoints' metadata (vitcpp_version) and the installed packages report.
#pragma once

#include "vit/export.h"

namespace vit {

VIT_API const char* version();

}  // namespace vit
