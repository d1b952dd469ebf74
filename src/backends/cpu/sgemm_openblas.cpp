// gemm()'s large products through OpenBLAS's cblas_sgemm (sgemm_library.h), the aarch64
// default: its NEON kernels per core (Neoverse, Cortex, ThunderX, ...), chosen at load
// time. The build links OpenBLAS's OpenMP build (libopenblas0-openmp), so a call runs on
// the program's OpenMP threads: omp_get_max_threads() of them, one inside a parallel
// region (OpenBLAS 0.3.21 checks omp_in_parallel()). Its threaded sgemm splits the rows
// and columns of C, never K, but cuts K into other blocks than its one-thread driver does:
// other last bits on 2 threads than on 1 at k = 600, 700 or 1576 (tests/ops/test_gemm.cpp's
// Gemm.LibraryProductsAreTheSameOnAnyThreadCount). So OpenBLAS never threads a call itself
// here: C is cut into tiles whose shapes depend on M and N alone, the threads share the
// tiles, and each tile is one single-threaded call (inside the parallel region), the same
// calls on any thread count, so the same bits (docs/design.md, "Matrix products").
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <string>

#include "backends/cpu/sgemm_library.h"
#include "core/check.h"

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

namespace {
constexpr int64_t kTiles = 8;  // at least, where the shape allows: 2 to 8 threads share them evenly

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t m) {
  return ceil_div(a, m) * m;
}

// C's tiles: columns in blocks of wc (16 to 512, a multiple of 16), and where that gives fewer
// than kTiles, rows in blocks of hr (at least 64). Each tile repacks its part of A and B, at
// most 1/wc and 1/hr of its arithmetic.
struct Tiling {
  int64_t wc, nc, hr, nr;
  Tiling(int64_t M, int64_t N) {
    wc = std::clamp<int64_t>(round_up(ceil_div(N, kTiles), 16), 16, 512);
    nc = ceil_div(N, wc);
    hr = nc >= kTiles ? M : std::max<int64_t>(64, round_up(ceil_div(M, ceil_div(kTiles, nc)), 8));
    nr = ceil_div(M, hr);
  }
};
}  // namespace

void sgemm_library(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_openmp_build();
  const Tiling t(M, N);
  const int64_t tiles = t.nr * t.nc;
  const auto tile = [&](int64_t i) {
    const int64_t r0 = i / t.nc * t.hr, c0 = i % t.nc * t.wc;
    const int64_t m = std::min(t.hr, M - r0), n = std::min(t.wc, N - c0);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(m),
                blasint(n), blasint(K), alpha, A + (ta ? r0 : r0 * lda), blasint(lda),
                B + (tb ? c0 * ldb : c0), blasint(ldb), beta, C + r0 * ldc + c0, blasint(ldc));
  };
  const int threads = omp_in_parallel() ? 1 : int(std::min<int64_t>(omp_get_max_threads(), tiles));
  if (threads <= 1) {  // the same single-threaded calls: OpenBLAS threads none on one thread
    for (int64_t i = 0; i < tiles; ++i) tile(i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < tiles; ++i) tile(i);
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
