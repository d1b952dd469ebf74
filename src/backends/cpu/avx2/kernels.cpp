// The AVX2 + FMA path's entries of the kernel table (kernel_set.h): the kernels every vector
// path has (path_kernels.h), then its own (the tiled product, 16-wide packed slices), then
// its int8 kernels, by what this CPU has beyond the path.
#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/gelu.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/layernorm.h"
#include "backends/cpu/linear_packed.h"
#include "backends/cpu/softmax.h"

namespace vit::cpu::avx2 {

void fill_kernels(CpuKernels& k) {
  VIT_FILL_PATH_KERNELS(k);
  k.warm_rows = warm_rows;
  k.attention_lanes.group = 8, k.attention_lanes.min_last = 6;
  k.tiled_gemm = tiled_gemm;
  k.packed_slice = kPackedSlice;
  k.packed_max_rows = kPackedMaxRows;
  k.bias_gelu_backward = bias_gelu_backward_by_columns<bias_gelu_backward_columns>;
  k.quantize_row_s8 = quantize_row_s8;
  k.dequant_s8 = dequant_s8;
  k.gemm_s8 = has_avx_vnni() ? gemm_s8_vnni : gemm_s8;
  k.gemm_s8_name = has_avx_vnni() ? "avx-vnni" : "avx2";
  k.gemm_s8_dot = has_avx_vnni();
}

}  // namespace vit::cpu::avx2
