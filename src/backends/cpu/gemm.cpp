// Matrix products through a library's sgemm (sgemm_library.h: oneDNN's dnnl_sgemm on x86-64,
// whatever OPENBLAS_CORETYPE says; OpenBLAS's cblas_sgemm on aarch64; docs/design.md,
// "Matrix products"). Products too small to amortize a library call use a plain loop, and
// products with few output columns (the tiny models' layers) the attention kernels' blocks
// (head_gemm.cpp's register blocks where the path has them, skinny_gemm.cpp in avx512/,
// avx2/ and neon/ for short sums).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/sgemm_library.h"
#include "core/settings.h"
#include "core/threads.h"

namespace vit::cpu {

namespace {
// Products of at most this many multiply-adds (M N K) take the plain loop: a library call
// or a register-block setup costs more.
constexpr int64_t kSmallProduct = 8 * 1024;

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

// C[M, N] = ct^T + beta C for ct [N, M], rows of C in order, on the calling thread (an
// OpenMP region per call costs more than these small adds; the widest C here is 147K floats).
void add_transposed(float* C, int64_t ldc, const float* ct, int64_t M, int64_t N, float beta) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float& c = C[i * ldc + j];
      const float y = ct[size_t(j * M + i)];
      c = beta != 0.f ? std::fma(beta, c, y) : y;
    }
}

// Products of at most kSkinnyN output columns: mnist-seed's layers (N = 8 to 32 over K = 8
// to 32, thousands of rows) ran in oneDNN's sgemm at a few percent of the machine, its
// packing and dispatch outweighing the arithmetic. head_gemm's register blocks (AVX-512,
// AVX2 or NEON) read B's rows
// whole from L1 and A through strides; an op(B) = B^T operand (a [N, K] weight) is
// transposed once into a small buffer first. Threads take whole blocks of rows, so each
// output is summed in k order by one thread whatever the thread count.
constexpr int64_t kSkinnyN = 32, kSkinnyTransposeK = 1024;

bool skinny(bool tb, int64_t N, int64_t K) {
  return N <= kSkinnyN && (!tb || K <= kSkinnyTransposeK) && head_kernels();
}

void gemm_skinny(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  const float* b = B;
  int64_t ld = ldb;
  if (tb) {  // B(k, j) = B[j ldb + k]: make it [K, N]
    thread_local Scratch<float> bt;
    float* t = grown(bt, K * N);
    head_transpose(t, N, B, ldb, N, K);
    b = t;
    ld = N;
  }
  const int64_t ars = ta ? 1 : lda, aks = ta ? lda : 1;
  const int nt = threads_for(M * N * K);
  const int64_t rows = (M + nt - 1) / nt, per = (rows + 11) / 12 * 12;  // whole 12-row blocks
  const SkinnyGemm skinny_kernel = kernels().skinny_gemm;
  on_threads(nt, [&](int t) {
    const int64_t i0 = std::min(M, t * per), i1 = std::min(M, i0 + per);
    if (i1 <= i0) return;
    if (!ta && skinny_kernel &&
        skinny_kernel(i1 - i0, N, K, alpha, A + i0 * lda, lda, b, ld, beta, bias, C + i0 * ldc, ldc))
      return;
    head_gemm(i1 - i0, N, K, alpha, A + i0 * ars, ars, aks, b, ld, beta, bias, C + i0 * ldc, ldc);
  });
}

// Share of the vector lanes that n output columns fill (16 per vector).
double lane_use(int64_t n) {
  return double(n) / double(16 * ((n + 15) / 16));
}

// op(A) = A^T with at most kSkinnyN rows of C: the weight gradients dW = dY^T X of the tiny
// models, e.g. mnist-seed's qkv [24, 8] and fc1 [32, 8] over 6400 rows. Their 8 columns fill
// half of each vector; C^T = X^T dY [8, 24] fills 3/4, [8, 32] all. Each output is the same
// fma chain over k (a b = b a exactly) and the same final alpha/beta step, so the bits are
// those of the direct product.
bool transposed_is_better(bool ta, bool tb, int64_t M, int64_t N) {
  return ta && !tb && M <= kSkinnyN && lane_use(M) > lane_use(N);
}

void gemm_skinny_transposed(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                            const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  thread_local Scratch<float> buf;
  float* ct = grown(buf, N * M);
  // C^T[N, M] = alpha B^T A (beta = 0: alpha times the sum, as the direct product's epilogue).
  gemm_skinny(true, false, N, M, K, alpha, B, ldb, A, lda, 0.f, nullptr, ct, M);
  add_transposed(C, ldc, ct, M, N, beta);
}

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // Products too small to feed every thread run on fewer (both libraries thread over
  // OpenMP's current count); inside a parallel region they run single-threaded anyway.
  struct ThreadCount {  // set for the call, restored on the way out (an error included)
    int all = omp_get_max_threads();
    bool set;
    explicit ThreadCount(int nt) : set(nt < all && !omp_in_parallel()) {
      if (set) omp_set_num_threads(nt);
    }
    ~ThreadCount() {
      if (set) omp_set_num_threads(all);
    }
  } threads(threads_for(M * N * K / 16));
  sgemm_library(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// C = A^T B over a long k with more rows than columns (a weight gradient dW = dY^T X whose
// layer widens, fc1's and qkv's in cifar-seed) runs as C^T = B^T A, the long side along the
// output's rows, plus a transposed add; the other way round (fc2's) it is slower, and so it
// is past the size where C stops fitting in L2 (docs/design.md, "Matrix products").
constexpr int64_t kWideTnMaxC = 256 * 1024;
bool wide_tn(bool ta, bool tb, int64_t M, int64_t N) {
  return ta && !tb && M > N && N > kSkinnyN && M * N <= kWideTnMaxC;
}

// The AVX2 path's own products (avx2/tiled_gemm.cpp), from a thousand rows up: A row-major
// over at most 256 output columns (cifar-seed's and ViT-Ti's 192-wide layers: the forward of
// proj and fc2, the input gradients of proj, fc1 and qkv), where they were ahead of oneDNN's
// sgemm call against call; wider outputs and the weight gradients stay with oneDNN
// (docs/design.md, "Tiled products of our own on AVX2").
constexpr int64_t kTiledMinRows = 1024, kTiledMaxN = 256;
}  // namespace

bool tiled_preferred(bool ta, bool /*tb*/, int64_t M, int64_t N, int64_t /*K*/, float alpha) {
  if (alpha != 1.f || ta || !kernels().tiled_gemm) return false;
  if (const std::string_view env = setting_choice("VIT_TILED"); !env.empty()) return env == "on";
  return M >= kTiledMinRows && N <= kTiledMaxN;
}

namespace {
void gemm_wide_tn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float beta, float* C, int64_t ldc) {
  thread_local Scratch<float> buf;
  float* ct = grown(buf, N * M);
  sgemm(true, false, N, M, K, alpha, B, ldb, A, lda, 0.f, ct, M);
  add_transposed(C, ldc, ct, M, N, beta);
}
}  // namespace

void transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

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

void gemm_chain_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float& c = C[i * ldc + j];
      float s = beta == 0.f ? 0.f : beta == 1.f ? c : beta * c;
      for (int64_t k = 0; k < K; ++k) s = std::fma(at(A, ta, lda, i, k), at(B, tb, ldb, k, j), s);
      c = s;
    }
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M * N * K <= kSmallProduct) return gemm_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (skinny(tb, N, K)) {
    if (transposed_is_better(ta, tb, M, N))
      return gemm_skinny_transposed(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return gemm_skinny(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, nullptr, C, ldc);
  }
  if (alpha == 1.f && gemm_tiled(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, nullptr)) return;
  if (wide_tn(ta, tb, M, N)) return gemm_wide_tn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool gemm_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias) {
  if (M * N * K <= kSmallProduct || skinny(tb, N, K) || !tiled_preferred(ta, tb, M, N, K, 1.f)) return false;
  kernels().tiled_gemm(tb, M, N, K, A, lda, B, ldb, beta, C, ldc, threads_for(M * N * K / 16), bias);
  return true;
}

// The stall is paid once per line of C, the product's work per line grows with K, and the
// zeros cost a write in the backward and a read here: worth it at cifar-seed's K = 192, no
// gain at ViT-B/16's K = 768 (docs/design.md, "Matrix products").
constexpr int64_t kZeroOutputMaxK = 512;
bool adds_onto_zeros(int64_t M, int64_t N, int64_t K) {
  return M * N * K > kSmallProduct && !skinny(true, N, K) && K < kZeroOutputMaxK &&
         !tiled_preferred(false, true, M, N, K, 1.f);  // (its stores do not stall: tiled_gemm.cpp)
}

void gemm_nt_bias(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  const float* bias, float* C, int64_t ldc, bool c_zero) {
  // dnnl_sgemm with beta = 0 stalls on its stores to C's lines when they are not in cache;
  // with beta = 1 it loads them first, ahead of use. On a C that is zero anyway (fc1's
  // output in training, cleared by the backward that read it last: bias_gelu_backward) it
  // adds onto it (faster for cifar-seed's fc1: docs/design.md, "Matrix products"). Zeroing C
  // first instead moves the stall into the zeroing: no gain.
  if (!bias)
    return gemm(false, true, M, N, K, 1.f, A, lda, B, ldb, c_zero && adds_onto_zeros(M, N, K) ? 1.f : 0.f, C,
                ldc);
  if (M * N * K > kSmallProduct && skinny(true, N, K))
    return gemm_skinny(false, true, M, N, K, 1.f, A, lda, B, ldb, 0.f, bias, C, ldc);
  if (gemm_tiled(false, true, M, N, K, A, lda, B, ldb, 0.f, C, ldc, bias)) return;  // seeds itself
#pragma omp parallel for num_threads(threads_for(M* N)) schedule(static)
  for (int64_t i = 0; i < M; ++i) std::memcpy(C + i * ldc, bias, N * sizeof(float));
  gemm(false, true, M, N, K, 1.f, A, lda, B, ldb, 1.f, C, ldc);
}

}  // namespace vit::cpu
