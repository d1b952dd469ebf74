// The library behind gemm()'s large products (gemm.cpp's sgemm()): one file per library,
// the build compiles the one CMake's VIT_SGEMM names (oneDNN's dnnl_sgemm by default on
// x86-64, OpenBLAS's cblas_sgemm on aarch64, where Debian's oneDNN has only its reference
// C++ product; docs/design.md, "Matrix products"). Both thread over OpenMP: a call uses
// omp_get_max_threads() threads, one inside a parallel region.
#pragma once

#include <cstdint>

namespace vit::cpu {

// C[M,N] = alpha op(A) op(B) + beta C, row-major, op = transpose when t* is true; beta = 0
// does not read C.
void sgemm_library(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The library, its version and threading as it reports them at run time, e.g.
// "oneDNN 2.6.3" or "OpenBLAS 0.3.21 (armv8, OpenMP)".
const char* sgemm_library_name();

}  // namespace vit::cpu
