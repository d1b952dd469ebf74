// The NEON path's entries of the kernel table (kernel_set.h): the kernels every vector
// path has (path_kernels.h), then its int8 kernels, by what this CPU has beyond the path.
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/gelu.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/layernorm.h"
#include "backends/cpu/linear_packed.h"
#include "backends/cpu/softmax.h"

namespace vit::cpu::neon {

void fill_kernels(CpuKernels& k) {
  VIT_FILL_PATH_KERNELS(k);
  // Whole groups of 4 only (attention.cpp); no read-ahead and packed weights never preferred:
  // neither is measured on arm64 hardware.
  k.attention_lanes.group = 4, k.attention_lanes.min_last = 4;
  k.bias_gelu_backward = bias_gelu_backward_by_columns<bias_gelu_backward_columns>;
  k.quantize_row_s8 = quantize_row_s8;
  k.gemm_s8 = has_dotprod() ? gemm_s8_dot : gemm_s8;
  k.gemm_s8_name = has_dotprod() ? "neon-dotprod" : "neon";
  k.gemm_s8_dot = has_dotprod();
}

}  // namespace vit::cpu::neon
