// What the backends report about themselves (ops.h).
#include "backends/cpu/int8.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_set.h"
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

const char* cpu_int8_product() {
  return cpu::int8_product_name();
}

const char* cpu_int8_table_product() {
  return cpu::kernels().gemm_s8_name;
}

bool cpu_int8_has_dot_product() {
  return cpu::int8_on_amx() || cpu::kernels().gemm_s8_dot;
}

}  // namespace vit::ops
