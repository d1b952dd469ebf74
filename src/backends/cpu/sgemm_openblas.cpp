// gemm()'s large products through OpenBLAS's cblas_sgemm (sgemm_library.h), the aarch64
// default: its NEON kernels per core (Neoverse, Cortex, ThunderX, ...), chosen at load
// time. The build links OpenBLAS's OpenMP build (libopenblas0-openmp), so a call runs on
// the program's OpenMP threads: omp_get_max_threads() of them, one inside a parallel
// region (OpenBLAS 0.3.21 checks omp_in_parallel()). Its threaded sgemm splits the rows
// and columns of C, never K; so, as with oneDNN, the bits depend on the thread count but
// not on anything else (docs/design.md, "Matrix products").
#include <cblas.h>

#include <string>

#include "backends/cpu/sgemm_library.h"
#include "vit/core/error.h"

namespace vit::cpu {

namespace {
// openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP.
constexpr int kOpenMP = 2;

// The build links the OpenMP build by its folder, but at run time the loader may take
// another one (Debian's alternatives for libopenblas.so.0, LD_LIBRARY_PATH): a pthreads
// build ignores --threads and runs its own pool beside OpenMP's, so refuse it.
void check_openmp_build() {
  static const bool ok = openblas_get_parallel() == kOpenMP;
  VIT_CHECK(ok, "OpenBLAS at run time is not its OpenMP build (", sgemm_library_name(),
            "): install libopenblas0-openmp and select it (update-alternatives --config libopenblas.so.0-",
            "<arch>-linux-gnu)");
}
}  // namespace

void sgemm_library(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_openmp_build();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(M),
              blasint(N), blasint(K), alpha, A, blasint(lda), B, blasint(ldb), beta, C, blasint(ldc));
}

const char* sgemm_library_name() {
  static const std::string name = [] {
    // openblas_get_config(): e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY neoversen1 MAX_THREADS=64".
    std::string config = openblas_get_config(), version = "OpenBLAS";
    if (config.rfind("OpenBLAS ", 0) == 0) version = config.substr(0, config.find(' ', 9));
    const int parallel = openblas_get_parallel();
    const char* threads = parallel == kOpenMP ? "OpenMP" : parallel == 1 ? "pthreads" : "sequential";
    return version + " (" + openblas_get_corename() + ", " + threads + ")";
  }();
  return name.c_str();
}

}  // namespace vit::cpu
