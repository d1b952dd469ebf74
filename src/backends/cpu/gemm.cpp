// Matrix products through oneDNN's dnnl_sgemm (row-major, OpenMP-threaded). Chosen over
// OpenBLAS because it reaches ~400 GFLOP/s here whatever OPENBLAS_CORETYPE says (see
// docs/benchmarks.md). Products too small to amortize a library call use a plain loop.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include "backends/cpu/cpu.h"
#include "vit/core/error.h"
#include "vit/core/threads.h"

namespace vit::cpu {

namespace {
inline float at(const float* X, bool t, int64_t ld, int64_t r, int64_t c) {
  return t ? X[c * ld + r] : X[r * ld + c];
}

void gemm_small(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.f;
      for (int64_t k = 0; k < K; ++k) s += at(A, ta, lda, i, k) * at(B, tb, ldb, k, j);
      float& c = C[i * ldc + j];
      c = alpha * s + (beta == 0.f ? 0.f : beta * c);
    }
}
}  // namespace

void gemm_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(at(A, ta, lda, i, k)) * at(B, tb, ldb, k, j);
      float& c = C[i * ldc + j];
      c = float(alpha * s + (beta == 0.f ? 0.0 : double(beta) * c));
    }
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M * N * K <= 8 * 1024) return gemm_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  // Products too small to feed every thread run on fewer (oneDNN threads over OpenMP's
  // current count); inside a parallel region oneDNN runs single-threaded anyway.
  const int all = omp_get_max_threads(), nt = threads_for(M * N * K / 16);
  if (nt < all && !omp_in_parallel()) omp_set_num_threads(nt);
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (nt < all && !omp_in_parallel()) omp_set_num_threads(all);
  VIT_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", int(st));
}

}  // namespace vit::cpu
