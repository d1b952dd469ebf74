// gemm()'s large products through oneDNN's dnnl_sgemm (sgemm_library.h): its JIT kernels
// per x86-64 CPU (AVX2, AVX-512), chosen at run time; OpenMP-threaded.
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "backends/cpu/sgemm_library.h"
#include "core/check.h"

namespace vit::cpu {

void sgemm_library(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  VIT_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", int(st));
}

const char* sgemm_library_name() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch);
  }();
  return name.c_str();
}

}  // namespace vit::cpu
