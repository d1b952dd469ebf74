// What the backends report about themselves (ops.h).
#include "backends/cpu/isa.h"
#include "backends/cpu/sgemm_library.h"
#include "ops/ops.h"

namespace vit::ops {

const char* cpu_isa() {
  return cpu::isa_name(cpu::isa());
}

const char* cpu_isa_detected() {
  return cpu::isa_name(cpu::isa_detected());
}

const char* cpu_gemm_library() {
  return cpu::sgemm_library_name();
}

}  // namespace vit::ops
