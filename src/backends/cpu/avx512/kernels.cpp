// The AVX-512 path's entries of the kernel table (kernel_set.h): the kernels every vector
// path has (path_kernels.h), then its int8 kernels, by what this CPU has beyond the path.
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/gelu.h"
#include "backends/cpu/kernel_set.h"

namespace vit::cpu::avx512 {

void fill_kernels(CpuKernels& k) {
  VIT_FILL_PATH_KERNELS(k);
  k.bias_gelu_backward = bias_gelu_backward;  // dx and db in one pass, its own threads
  k.quantize_row_s8 = quantize_row_s8;
  k.dequant_s8 = dequant_s8;
  if (!has_vnni()) return;  // AVX-512 without VNNI: avx2's (AVX-VNNI or vpmaddubsw) is as good
  k.gemm_s8 = gemm_s8_vnni;
  k.gemm_s8_name = "avx512-vnni";
}

}  // namespace vit::cpu::avx512
