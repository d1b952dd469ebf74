#include "core/decimal.h"

#include <cstdio>
#include <cstdlib>

namespace vit {

double shortest_decimal(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {  // 9 digits always read back to the same float
    std::snprintf(buf, sizeof buf, "%.*g", prec, double(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

}  // namespace vit
