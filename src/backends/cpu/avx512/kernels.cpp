// The AVX-512 path's entries of the kernel table (kernel_set.h): the kernels every vector
// path has (path_kernels.h), then its own (the LayerNorm backward in one pass, the softmax
// inside head_scores), then its int8 kernels, by what this CPU has beyond the path. It keeps
// avx2's packed_max_rows, not its tiled product or 16-wide slices.
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/gelu.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/layernorm.h"
#include "backends/cpu/linear_packed.h"
#include "backends/cpu/softmax.h"

namespace vit::cpu::avx512 {

void fill_kernels(CpuKernels& k) {
  VIT_FILL_PATH_KERNELS(k);
  k.layernorm_one_pass_fits = one_pass_backward_fits;
  k.layernorm_backward_one_pass = layernorm_backward_one_pass;
  k.warm_rows = warm_rows;
  k.attention_lanes.group = 16, k.attention_lanes.min_last = 12;
  k.head_scores = head_scores;
  k.tiled_gemm = nullptr;
  k.packed_slice = kPanel;
  k.bias_gelu_backward = bias_gelu_backward;  // dx and db in one pass, its own threads
  k.quantize_row_s8 = quantize_row_s8;
  k.dequant_s8 = dequant_s8;
  if (!has_vnni()) return;  // AVX-512 without VNNI: avx2's (AVX-VNNI or vpmaddubsw) is as good
  k.gemm_s8 = gemm_s8_vnni;
  k.gemm_s8_name = "avx512-vnni";
  k.gemm_s8_dot = true;
}

}  // namespace vit::cpu::avx512
