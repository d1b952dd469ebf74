// Attention's per-head products on the path in use (cpu.h): the kernel table's (kernel_set.h)
// register-block kernels of avx512/, avx2/ and neon/, or generic/kernels.cpp's plain loops,
// which are also what the tests hold the others to (tests/ops/test_kernel_table.cpp).
#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"

namespace vit::cpu {

bool head_kernels() {
  return kernels().register_blocks;
}

void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  kernels().head_gemm(M, N, K, alpha, A, ars, aks, B, ldb, beta, bias, C, ldc);
}

void head_scores(HeadScores mode, int64_t M, int64_t T, int64_t D, float alpha, const float* q, int64_t ldq,
                 const float* kT, int64_t ldk, const uint8_t* km, const float* P, float* C, int64_t ldc) {
  // AVX-512 applies the softmax while S is in registers.
  if (const HeadScoresFused fused = kernels().head_scores)
    return fused(mode, M, T, D, alpha, q, ldq, kT, ldk, km, P, C, ldc);
  // Elsewhere the product, then the row softmax (or its backward): all rows in one call where
  // they are contiguous (the kernels interleave a few rows; each row's result is the same in
  // any group), else one at a time.
  head_gemm(M, T, D, alpha, q, ldq, 1, kT, ldk, 0.f, nullptr, C, ldc);
  if (mode == HeadScores::Store) return;
  const int64_t per = ldc == T ? M : 1;
  for (int64_t i = 0; i < M; i += per)
    if (mode == HeadScores::Softmax)
      softmax_rows(C + i * ldc, per, T, km);
    else
      softmax_backward_rows(C + i * ldc, P + i * ldc, per, T);
}

void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols) {
  kernels().head_transpose(dst, ldd, src, lds, rows, cols);
}

}  // namespace vit::cpu
