// What the backends report about themselves (ops.h).
#include "backends/cpu/isa.h"
#include "vit/ops/ops.h"

namespace vit::ops {

const char* cpu_isa() {
  return cpu::isa_name(cpu::isa());
}

const char* cpu_isa_detected() {
  return cpu::isa_name(cpu::isa_detected());
}

}  // namespace vit::ops
