// The one place an op learns that a device has no kernel yet.
#pragma once
#include "core/check.h"
#include "core/tensor.h"

namespace vit::ops {

[[noreturn]] inline void unsupported(const char* op, Device d) {
  throw Error(detail::concat(op, ": no kernel for device ", device_name(d)));
}

}  // namespace vit::ops
