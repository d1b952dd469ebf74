// The library-backed gemm (oneDNN or OpenBLAS: sgemm_library.h) and its small-size loop
// against the double-accumulating reference; the bf16 inference linear against fp32.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/linear_packed.h"
#include "backends/cpu/neon/kernels.h"
#include "backends/cpu/sgemm_library.h"
#include "core/threads.h"
#include "support/check.h"

namespace vit {

struct GemmCase {
  int64_t M, N, K;
  bool ta, tb;
};

class Gemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Gemm, MatchesReference) {
  const auto c = GetParam();
  auto A = test::randn(c.M * c.K, 1), B = test::randn(c.K * c.N, 2), C0 = test::randn(c.M * c.N, 3);
  const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
  std::vector<float> got = C0, want = C0;
  cpu::gemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, 1.f, got.data(), c.N);
  cpu::gemm_reference(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, 1.f, want.data(), c.N);
  // float accumulation over K terms of unit-variance products: relative error ~1e-6 (x sqrt(K)).
  const double tol = c.K > 1000 ? 1e-4 : 1e-5;
  EXPECT_TRUE(test::close_rel_max("gemm, beta 1", got.data(), want.data(), c.M * c.N, tol));
  // beta = 0 assigns: C is not read (NaN there must not leak into the result).
  std::fill(got.begin(), got.end(), std::nanf(""));
  std::fill(want.begin(), want.end(), 0.f);
  cpu::gemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, 0.f, got.data(), c.N);
  cpu::gemm_reference(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, 0.f, want.data(), c.N);
  EXPECT_TRUE(test::close_rel_max("gemm, beta 0", got.data(), want.data(), c.M * c.N, tol));
  if (c.ta || !c.tb) return;
  // The linear layer's product with the bias added (in the skinny kernels' epilogue, or
  // seeded before sgemm): C is not read, every row gets the bias.
  auto bias = test::randn(c.N, 4);
  std::fill(got.begin(), got.end(), std::nanf(""));
  cpu::gemm_nt_bias(c.M, c.N, c.K, A.data(), lda, B.data(), ldb, bias.data(), got.data(), c.N);
  cpu::gemm_reference(false, true, c.M, c.N, c.K, 1.f, A.data(), lda, B.data(), ldb, 0.f, want.data(), c.N);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) want[i * c.N + j] += bias[j];
  EXPECT_TRUE(test::close_rel_max("gemm_nt_bias", got.data(), want.data(), c.M * c.N, tol));
  // Without a bias, onto a C known to hold zeros (c_zero: sgemm may add onto it): the same
  // bits as assigning.
  std::vector<float> assigned(c.M * c.N, std::nanf(""));
  cpu::gemm_nt_bias(c.M, c.N, c.K, A.data(), lda, B.data(), ldb, nullptr, assigned.data(), c.N);
  std::fill(got.begin(), got.end(), 0.f);
  cpu::gemm_nt_bias(c.M, c.N, c.K, A.data(), lda, B.data(), ldb, nullptr, got.data(), c.N, true);
  EXPECT_TRUE(test::close_rel_max("gemm_nt_bias onto zeros", got.data(), assigned.data(), c.M * c.N, 0.0));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Gemm,
    ::testing::Values(GemmCase{3, 5, 4, false, false}, GemmCase{7, 3, 5, true, false},
                      GemmCase{4, 6, 3, false, true}, GemmCase{5, 4, 6, true, true},
                      GemmCase{130, 70, 90, false, false}, GemmCase{130, 70, 90, true, false},
                      GemmCase{130, 70, 90, false, true}, GemmCase{130, 70, 90, true, true},
                      // Few output columns (mnist-seed's layers): register blocks
                      // with tails in rows and columns, A and B either way round.
                      GemmCase{3200, 24, 8, false, true},   // qkv forward
                      GemmCase{3200, 8, 24, false, false},  // its dx
                      GemmCase{24, 8, 3200, true, false},   // its dw (computed as dw^T)
                      GemmCase{32, 8, 3200, true, false},   // fc1's dw (as dw^T, full vectors)
                      GemmCase{20, 12, 700, true, false},   // dw^T with tails both ways
                      GemmCase{3136, 8, 16, false, true},   // patch embedding
                      GemmCase{50, 4, 50, false, false}, GemmCase{37, 32, 17, true, true},
                      GemmCase{1000, 1, 9, false, false}, GemmCase{29, 17, 300, true, true},
                      GemmCase{130, 33, 90, false, true},  // one column past them
                      // A widening layer's dW = dY^T X (more rows than columns): as dW^T.
                      GemmCase{300, 96, 1200, true, false}));

// The library of the large products (VIT_SGEMM) names itself; OpenBLAS must be its OpenMP
// build at run time, so that its threads are the program's (sgemm_openblas.cpp).
TEST(Gemm, LibraryNamesItselfAndOpenBLASIsItsOpenMPBuild) {
  const std::string name = cpu::sgemm_library_name();
  std::cout << "sgemm library: " << name << "\n";
  const bool openblas = name.rfind("OpenBLAS ", 0) == 0;
  EXPECT_TRUE(openblas || name.rfind("oneDNN ", 0) == 0) << name;
  if (openblas) {
    EXPECT_NE(name.find(", OpenMP)"), std::string::npos) << name;
  }
}

namespace {
struct GemmShape {
  int64_t M, N, K;
  bool ta, tb;
};
// gemm on 1 and on 2 threads gives the same bits, for beta 0 and 1.
void expect_same_bits_on_one_thread_and_two(const std::vector<GemmShape>& shapes) {
  const int saved = omp_get_max_threads();
  for (const GemmShape& c : shapes)
    for (float beta : {0.f, 1.f}) {
      const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
      const auto A = test::randn(c.M * c.K, 1), B = test::randn(c.K * c.N, 2), C0 = test::randn(c.M * c.N, 3);
      std::vector<std::vector<float>> got(2, C0);
      for (int t : {1, 2}) {
        omp_set_num_threads(t);
        cpu::gemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, beta, got[t - 1].data(),
                  c.N);
      }
      omp_set_num_threads(saved);
      EXPECT_TRUE(test::close_rel_max("gemm " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                                          std::to_string(c.K) + (c.ta ? " A^T" : "") + (c.tb ? " B^T" : "") +
                                          " beta " + std::to_string(int(beta)) + ", 1 vs 2 threads",
                                      got[1].data(), got[0].data(), c.M * c.N, 0.0));
    }
}
}  // namespace

// Products with few output columns split their rows over threads in whole blocks: each
// output is summed by one thread in k order, so the bits do not depend on the thread count.
// Weight gradients of mnist-seed's fc1 (as dW^T), fc2, qkv (as dW^T) and patch embedding
// (one block of rows), a row split (qkv forward, AVX-512 and AVX2 skinny_gemm), beta 0 and 1.
TEST(Gemm, FewColumnsAreTheSameOnAnyThreadCount) {
  expect_same_bits_on_one_thread_and_two({{32, 8, 6400, true, false},
                                          {8, 32, 6400, true, false},
                                          {24, 8, 6400, true, false},
                                          {8, 16, 6272, true, false},
                                          {6400, 24, 8, false, true},
                                          {20, 13, 5000, true, false}});
}

// The library's products (oneDNN's sgemm on x86-64, OpenBLAS's on aarch64) too: ViT layers
// at batch 1 (197 rows), a weight gradient over a long k (batch x tokens rows), and sums
// whose length the libraries cut into blocks differently on one thread and on several
// (OpenBLAS 0.3.21 gave other last bits on 2 threads at k = 600, 700 and 1576 when it
// threaded the call itself).
TEST(Gemm, LibraryProductsAreTheSameOnAnyThreadCount) {
  expect_same_bits_on_one_thread_and_two({{197, 576, 192, false, true},
                                          {197, 192, 768, false, true},
                                          {197, 256, 600, false, true},
                                          {197, 96, 700, false, false},
                                          {100, 80, 1576, false, true},
                                          {192, 576, 2080, true, false},
                                          {48, 300, 1576, true, false}});
}

// AVX-512, AVX2 and NEON code called directly: each in the builds that compile its folder.
#if VIT_ISA_X86 || VIT_ISA_NEON
namespace {
using SkinnyFn = bool (*)(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, const float*, float*, int64_t);
using HeadGemmFn = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*,
                            int64_t, float, const float*, float*, int64_t);

// skinny_gemm (short sums with compile-time K, rows inside the kernel) makes each output
// with head_gemm's fma chain and epilogue: the same bits, with and without beta and bias,
// in full row blocks and the row-at-a-time tail, every count of column vectors (and, on
// AVX-512, B in registers (K x vectors <= 16) or not).
void expect_skinny_same_bits_as_head_gemm(const char* path, SkinnyFn skinny, HeadGemmFn head) {
  int cases = 0;
  for (int64_t K : {8, 16, 24, 32})
    for (int64_t N : {1, 8, 10, 13, 16, 17, 24, 27, 32})
      for (int64_t M : {1, 7, 37, 203})
        for (bool beta : {false, true})
          for (bool bias : {false, true}) {
            const int64_t lda = K + 3, ldb = N + 5, ldc = N + 2;
            const auto A = test::randn(M * lda, 1), B = test::randn(K * ldb, 2), b = test::randn(N, 3);
            const auto C0 = test::randn(M * ldc, 4);
            std::vector<float> got = C0, want = C0;
            ASSERT_TRUE(skinny(M, N, K, 0.3f, A.data(), lda, B.data(), ldb, beta ? 1.f : 0.f,
                               bias ? b.data() : nullptr, got.data(), ldc));
            head(M, N, K, 0.3f, A.data(), lda, 1, B.data(), ldb, beta ? 1.f : 0.f, bias ? b.data() : nullptr,
                 want.data(), ldc);
            EXPECT_EQ(got, want) << path << " " << M << "x" << N << "x" << K << " beta " << beta << " bias "
                                 << bias;
            ++cases;
          }
  EXPECT_EQ(cases, 576);
  std::vector<float> c(8);
  EXPECT_FALSE(skinny(1, 8, 12, 1.f, c.data(), 12, c.data(), 8, 0.f, nullptr, c.data(), 8))
      << path << ": K = 12 is not one of the kernel's";
  EXPECT_FALSE(skinny(1, 33, 8, 1.f, c.data(), 8, c.data(), 33, 0.f, nullptr, c.data(), 33)) << path;
}
}  // namespace
#endif

#if VIT_ISA_X86
TEST(SkinnyGemm, SameBitsAsHeadGemm) {
  if (cpu::isa() != cpu::Isa::avx512) GTEST_SKIP() << "no AVX-512";
  expect_skinny_same_bits_as_head_gemm("avx512", cpu::avx512::skinny_gemm, cpu::avx512::head_gemm);
}

TEST(SkinnyGemm, Avx2SameBitsAsHeadGemm) {
  if (!cpu::isa_supported(cpu::Isa::avx2)) GTEST_SKIP() << "no AVX2";
  expect_skinny_same_bits_as_head_gemm("avx2", cpu::avx2::skinny_gemm, cpu::avx2::head_gemm);
}

// The AVX2 path's tiled products make each output one fma chain over k in order, from 0, C or
// beta C: gemm_chain_reference's bits, exactly, for A row-major with B either way; rows past
// whole register blocks (M % 6, M < 6), columns past whole slices (N % 16, N < 16), k over
// several chunks of 384 and past them, k = 0, leading dimensions wider than the matrices, on
// one thread and on two. beta 0 must not read C (NaN there). Chains started from a bias
// (beta 0) give the bits of C seeded with it and beta 1.
TEST(TiledGemm, Avx2SameBitsAsTheFmaChainOnAnyThreadCount) {
  if (!cpu::isa_supported(cpu::Isa::avx2)) GTEST_SKIP() << "no AVX2";
  struct Case {
    int64_t M, N, K;
    bool tb;
  };
  const Case cases[] = {{97, 40, 800, true},   {97, 40, 800, false}, {5, 7, 9, true},
                        {5, 7, 9, false},      {6, 16, 384, false},  {13, 33, 0, true},
                        {130, 192, 385, true}, {49, 17, 1200, false}};
  int checked = 0;
  for (const Case& c : cases)
    for (float beta : {0.f, 1.f, 0.5f})
      for (int nt : {1, 2}) {
        const int64_t lda = c.K + 3, ldb = (c.tb ? c.K : c.N) + 5, ldc = c.N + 2;
        const auto A = test::randn(c.M * lda, 1), B = test::randn((c.tb ? c.N : c.K) * ldb, 2);
        auto C0 = test::randn(c.M * ldc, 3);
        std::vector<float> got = C0, want = C0;
        if (beta == 0.f)  // C's own elements; the columns between N and ldc must stay as they are
          for (int64_t i = 0; i < c.M; ++i) std::fill_n(got.begin() + i * ldc, c.N, std::nanf(""));
        const std::string what = "tiled " + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" +
                                 std::to_string(c.K) + (c.tb ? " B^T" : "") + " beta " +
                                 std::to_string(beta) + " on " + std::to_string(nt);
        cpu::avx2::tiled_gemm(c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, beta, got.data(), ldc, nt);
        cpu::gemm_chain_reference(false, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, beta, want.data(),
                                  ldc);
        EXPECT_TRUE(test::close_rel_max(what, got.data(), want.data(), c.M * ldc, 0.0));
        ++checked;
        if (beta == 0.f) {
          const auto bias = test::randn(c.N, 5);
          for (int64_t i = 0; i < c.M; ++i) {
            std::fill_n(got.begin() + i * ldc, c.N, std::nanf(""));
            std::copy_n(bias.begin(), c.N, want.begin() + i * ldc);
          }
          cpu::avx2::tiled_gemm(c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, 0.f, got.data(), ldc, nt,
                                bias.data());
          cpu::gemm_chain_reference(false, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, 1.f,
                                    want.data(), ldc);
          EXPECT_TRUE(test::close_rel_max(what + " from a bias", got.data(), want.data(), c.M * ldc, 0.0));
          ++checked;
        }
      }
  EXPECT_EQ(checked, 8 * 3 * 2 + 8 * 2);  // products, bias starts
}

// gemm() takes the tiled kernel for the large products over narrow layers on the AVX2 path
// (cifar-seed's training shapes at 8320 rows), not for wide outputs over a short k, nor for
// the weight gradients (A^T B), nor with alpha != 1, nor on another path.
TEST(TiledGemm, ChosenForLargeProductsOverNarrowLayersOnAvx2) {
  const bool avx2 = cpu::isa() == cpu::Isa::avx2 && !std::getenv("VIT_TILED");
  EXPECT_EQ(cpu::tiled_preferred(false, true, 8320, 192, 768, 1.f), avx2);   // fc2 forward
  EXPECT_EQ(cpu::tiled_preferred(false, false, 8320, 192, 576, 1.f), avx2);  // qkv's input gradient
  EXPECT_EQ(cpu::tiled_preferred(false, false, 8320, 192, 768, 1.f), avx2);  // fc1's input gradient
  EXPECT_FALSE(cpu::tiled_preferred(true, false, 192, 768, 8320, 1.f));      // fc2's weight gradient
  EXPECT_FALSE(cpu::tiled_preferred(true, false, 768, 192, 8320, 1.f));      // fc1's
  EXPECT_FALSE(cpu::tiled_preferred(false, true, 8320, 576, 192, 1.f));      // qkv forward: oneDNN's
  EXPECT_FALSE(cpu::tiled_preferred(true, false, 192, 192, 8320, 1.f));      // proj's weight gradient
  EXPECT_FALSE(cpu::tiled_preferred(false, true, 8320, 192, 768, 0.5f));
  EXPECT_FALSE(cpu::tiled_preferred(false, true, 197, 192, 768, 1.f));    // batch 1
  EXPECT_FALSE(cpu::tiled_preferred(true, false, 768, 3072, 8320, 1.f));  // ViT-B/16's fc1
  EXPECT_FALSE(cpu::tiled_preferred(true, true, 192, 192, 8320, 1.f));
}
#endif

#if VIT_ISA_NEON
TEST(SkinnyGemm, NeonSameBitsAsHeadGemm) {
  if (!cpu::isa_supported(cpu::Isa::neon)) GTEST_SKIP() << "no NEON";
  expect_skinny_same_bits_as_head_gemm("neon", cpu::neon::skinny_gemm, cpu::neon::head_gemm);
}
#endif

}  // namespace vit

namespace vit {

// bf16 inference linear (oneDNN matmul on bf16 inputs, fp32 accumulation). Small integers
// are exact in bf16 and their dot products exact in fp32, so there the result must equal
// the fp32 product bit for bit (this catches a wrong layout or transposition); on random
// values the error is bf16's rounding of x and w (2^-9 relative each), so after K=300 terms
// of random sign about 0.3% of the largest output: 2e-2 is allowed.
TEST(LinearBf16, ExactOnSmallIntegersAndCloseOnRandomValues) {
  if (!cpu::bf16_matmul_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  const int64_t K = 300, N = 70, Mmax = 197;
  std::vector<float> x(Mmax * K), w(N * K), b(N);
  for (int64_t i = 0; i < Mmax * K; ++i) x[i] = float(int(i * 7 % 9) - 4);
  for (int64_t i = 0; i < N * K; ++i) w[i] = float(int(i * 5 % 7) - 3);
  for (int64_t j = 0; j < N; ++j) b[j] = float(j % 5) - 2;
  const auto xr = test::randn(Mmax * K, 4), wr = test::randn(N * K, 5);
  // One pack of each weight serves every row count.
  const auto packed_int = cpu::pack_bf16(w.data(), N, K), packed = cpu::pack_bf16(wr.data(), N, K);
  for (const int64_t M : {int64_t(1), int64_t(5), Mmax, int64_t(64)}) {
    std::vector<float> got(M * N), want(M * N);
    cpu::linear_forward_bf16(got.data(), x.data(), *packed_int, b.data(), M);
    cpu::linear_forward(want.data(), x.data(), w.data(), b.data(), M, K, N);
    EXPECT_EQ(got, want) << "M=" << M;
    cpu::linear_forward_bf16(got.data(), xr.data(), *packed, nullptr, M);
    cpu::gemm_reference(false, true, M, N, K, 1.f, xr.data(), K, wr.data(), K, 0.f, want.data(), N);
    EXPECT_TRUE(
        test::close_rel_max("linear bf16 M=" + std::to_string(M), got.data(), want.data(), M * N, 2e-2));
  }
}

// Called from inside a caller's parallel region, by both of its threads at once and each asking
// for two threads, the bf16 linear gives what a call outside it gives (its primitives are kept
// by row count, not thread count; a primitive split for two threads that ran one thread's share
// would leave half the outputs; 1e-5 allows another order of the fp32 sums, where a split of K
// would bring one). LinearInt8.InsideAParallelRegionAndFromTwoThreads does the same for int8.
TEST(LinearBf16, InsideAParallelRegionMatchesASerialCall) {
  if (!cpu::bf16_matmul_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  const int64_t M = 384, N = 512, K = 256;
  const auto x = test::randn(M * K, 6), w = test::randn(N * K, 7), b = test::randn(N, 8);
  std::vector<float> want(M * N), a(M * N, 9.f), c(M * N, 9.f);
  cpu::linear_forward_bf16(want.data(), x.data(), *cpu::pack_bf16(w.data(), N, K), b.data(), M);
  const auto packed = cpu::pack_bf16(w.data(), N, K);  // its primitives made inside the region
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
#pragma omp parallel num_threads(2)
  {
    omp_set_num_threads(2);
    std::vector<float>& y = omp_get_thread_num() == 0 ? a : c;
    cpu::linear_forward_bf16(y.data(), x.data(), *packed, b.data(), M);
  }
  omp_set_num_threads(saved);
  EXPECT_TRUE(test::close_rel_max("thread 0 of a parallel region", a.data(), want.data(), M * N, 1e-5));
  EXPECT_TRUE(test::close_rel_max("thread 1 of a parallel region", c.data(), want.data(), M * N, 1e-5));
}

}  // namespace vit

namespace vit {

// The bf16 MLP (the activation fused into fc1's matmul, bf16 hidden activations) against the
// fp32 composition linear, activation, linear, for each activation: bf16 rounds x, both weights and the
// hidden activations (2^-9 relative each), so 2e-2 of the largest output is allowed, as for one bf16 linear.
// A composition that dropped the GELU or swapped the weights would be off by O(1).
TEST(MlpBf16, MatchesTheFp32Composition) {
  if (!cpu::bf16_matmul_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  const int64_t K = 96, Hd = 200, N = 72;
  const auto w1 = test::randn(Hd * K, 11, 0.1f), w2 = test::randn(N * Hd, 12, 0.1f), b1 = test::randn(Hd, 13),
             b2 = test::randn(N, 14), x = test::randn(197 * K, 15);
  const auto fc1 = cpu::pack_bf16(w1.data(), Hd, K), fc2 = cpu::pack_bf16(w2.data(), N, Hd);
  for (const Activation act : {Activation::gelu, Activation::gelu_tanh, Activation::quick_gelu})
    for (const int64_t M : {int64_t(1), int64_t(197), int64_t(30)}) {
      std::vector<float> got(M * N), want(M * N), h(M * Hd);
      cpu::mlp_forward_bf16(got.data(), x.data(), *fc1, b1.data(), *fc2, b2.data(), M, act);
      cpu::linear_forward(h.data(), x.data(), w1.data(), b1.data(), M, K, Hd);
      if (act == Activation::gelu)
        cpu::gelu_forward_reference(h.data(), h.data(), M * Hd);
      else
        cpu::act_forward(h.data(), h.data(), M * Hd, act);  // checked on its own in test_gelu.cpp
      cpu::linear_forward(want.data(), h.data(), w2.data(), b2.data(), M, Hd, N);
      EXPECT_TRUE(
          test::close_rel_max(std::string("mlp bf16 ") + activation_name(act) + ", M=" + std::to_string(M),
                              got.data(), want.data(), M * N, 2e-2));
    }
}

// The fp32 linear on weights packed in place (64-row panels, transposed, in the path's column
// slices: packed_slice()): packing and unpacking are exact inverses; on small integers every
// product and sum is exact, so the kernel must equal oneDNN's sgemm bit for bit (a wrong panel,
// tail mask, row block, k chunk or prefetch that writes shows as a wrong value); on random
// values it is within float rounding of the double reference. Shapes cover tails: N not a
// multiple of 16 or 64 (a narrow last panel), M not a multiple of the 6-row block (tails of 1
// to 5 rows), K past one 768-wide chunk and not a multiple of it, K = 1, K = 0 (y = b); panels
// shared out by threads (4 panels) and by row blocks (3 panels on 2 threads); and ViT widths.
TEST(LinearPacked, ExactOnSmallIntegersCloseOnRandomValuesAndUnpacksExactly) {
  struct Case {
    int64_t M, N, K;
  };
  for (const Case c : {Case{1, 16, 8}, Case{197, 70, 33}, Case{5, 7, 1}, Case{300, 40, 64}, Case{9, 48, 19},
                       Case{13, 50, 400}, Case{20, 33, 200}, Case{197, 128, 64}, Case{4, 64, 384},
                       Case{197, 96, 768}, Case{197, 150, 1000}, Case{11, 256, 1600}, Case{8, 130, 770},
                       Case{3, 192, 1537}, Case{2, 768, 768}, Case{3, 20, 0}}) {
    const std::string where = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K);
    std::vector<float> x(c.M * c.K), w(c.N * c.K), b(c.N);
    for (int64_t i = 0; i < c.M * c.K; ++i) x[i] = float(int(i * 7 % 9) - 4);
    for (int64_t i = 0; i < c.N * c.K; ++i) w[i] = float(int(i * 5 % 7) - 3);
    for (int64_t j = 0; j < c.N; ++j) b[j] = float(j % 5) - 2;
    std::vector<float> wp = w, got(c.M * c.N), want(c.M * c.N);
    cpu::pack_linear_weights(wp.data(), c.N, c.K);
    if (c.N > 1 && c.K > 1) {  // distinct values, so no permutation leaves them as they were
      std::vector<float> iota(c.N * c.K), moved;
      for (size_t i = 0; i < iota.size(); ++i) iota[i] = float(i);
      moved = iota;
      cpu::pack_linear_weights(moved.data(), c.N, c.K);
      EXPECT_NE(moved, iota) << where << ": packing must move the weights";
    }
    cpu::linear_forward_packed(got.data(), x.data(), wp.data(), b.data(), c.M, c.K, c.N);
    cpu::linear_forward(want.data(), x.data(), w.data(), b.data(), c.M, c.K, c.N);
    EXPECT_EQ(got, want) << where;

    const auto xr = test::randn(c.M * c.K, 6), wr = test::randn(c.N * c.K, 7);
    std::vector<float> wrp = wr;
    cpu::pack_linear_weights(wrp.data(), c.N, c.K);
    cpu::linear_forward_packed(got.data(), xr.data(), wrp.data(), nullptr, c.M, c.K, c.N);
    cpu::gemm_reference(false, true, c.M, c.N, c.K, 1.f, xr.data(), c.K, wr.data(), c.K, 0.f, want.data(),
                        c.N);
    EXPECT_TRUE(test::close_rel_max("linear packed " + where, got.data(), want.data(), c.M * c.N, 1e-5));
    cpu::unpack_linear_weights(wrp.data(), c.N, c.K);
    EXPECT_EQ(wrp, wr) << where << ": unpacking restores the weights exactly";
  }
}

// Each output is one fma chain over k in order, whoever computes it: one thread and two
// (which split panels, or row blocks where the panels do not share out) give the same bits.
TEST(LinearPacked, SameBitsOnOneThreadAndTwo) {
  struct Case {
    int64_t M, N, K;
  };
  for (const Case c : {Case{197, 768, 768}, Case{197, 192, 768}, Case{61, 130, 1000}}) {
    const std::string where = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K);
    const auto x = test::randn(c.M * c.K, 31), b = test::randn(c.N, 33);
    auto wp = test::randn(c.N * c.K, 32);
    cpu::pack_linear_weights(wp.data(), c.N, c.K);
    std::vector<float> one(c.M * c.N), two(c.M * c.N);
    const int before = num_threads();
    set_num_threads(1);
    cpu::linear_forward_packed(one.data(), x.data(), wp.data(), b.data(), c.M, c.K, c.N, true);
    set_num_threads(2);
    cpu::linear_forward_packed(two.data(), x.data(), wp.data(), b.data(), c.M, c.K, c.N, true);
    set_num_threads(before);
    EXPECT_EQ(one, two) << where;
  }
}

// The weights each kernel prefetches while a slice runs (PackedWalk::next_weights) are the
// next slice's of the same walk: where the walk's next step reads, as many floats as it
// reads, and none after its last slice. With whole panels stored as one [K][w] block
// (S = kPanel: AVX-512, NEON) that is one piece, [kc][w] of the panel; with panels stored in
// column slices of S = 16 (AVX2), one [kc][s] piece per slice, slice j starting S j K floats
// into its panel. Shapes with a narrow last panel (and so a narrow last slice) and several k
// chunks; the whole product (one thread's walk) and a share of the panels from the second on
// over part of the row blocks.
TEST(LinearPacked, PrefetchedWeightsAreTheNextSlices) {
  struct Case {
    int64_t M, N, K, chunk;
  };
  for (const Case c : {Case{197, 768, 768, 768}, Case{197, 200, 1000, 384}, Case{61, 130, 1000, 768},
                       Case{6, 3072, 1536, 768}, Case{13, 50, 400, 384}}) {
    const cpu::PanelSplit split(c.M, c.N, 6, 1);
    const std::vector<float> weights(c.N * c.K);  // addresses only: nothing is read
    const float* wp = weights.data();
    const cpu::PanelSplit::Share shares[] = {split.whole(), {1, split.panels, 1, split.blocks}};
    for (const cpu::PanelSplit::Share& share : shares) {
      if (share.p0 >= share.p1) continue;  // one panel only: no second share
      const std::string where = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
                                " chunk " + std::to_string(c.chunk) + " panels from " +
                                std::to_string(share.p0);
      int slices = 0;
      for (cpu::PackedWalk it(share, c.K, c.N, c.chunk); it.more(); ++slices) {
        const cpu::PackedWalk::Pieces panel = it.next_weights(wp, cpu::kPanel);  // S = kPanel: one piece
        const float* next = panel.start[0];
        const int64_t floats = panel.floats[0];
        const cpu::PackedWalk::Lines lines16 = it.next_slice_lines(wp, 16);
        it.next();
        if (!it.more()) {
          EXPECT_EQ(next, nullptr) << where << ": after the last slice";
          EXPECT_EQ(floats, 0) << where;
          EXPECT_EQ(panel.n, 0) << where;
          EXPECT_EQ(lines16.pieces.n, 0) << where;
          EXPECT_EQ(lines16.lines, 0) << where;
          break;
        }
        const cpu::PackedSlice& s = it.slice;
        const std::string at = where + ", slice " + std::to_string(slices + 1);
        EXPECT_EQ(next - wp, s.n0 * c.K + s.k0 * s.w) << at;
        EXPECT_EQ(floats, s.kc * s.w) << at;
        EXPECT_EQ(panel.n, 1) << at;
        ASSERT_EQ(lines16.pieces.n, (s.w + 15) / 16) << at;
        int64_t total = 0;
        for (int j = 0; j < lines16.pieces.n; ++j) {
          const int64_t sw = std::min<int64_t>(16, s.w - 16 * j);
          EXPECT_EQ(lines16.pieces.start[j] - wp, s.n0 * c.K + 16 * j * c.K + s.k0 * sw)
              << at << ", piece " << j;
          EXPECT_EQ(lines16.pieces.floats[j], s.kc * sw) << at << ", piece " << j;
          // line() walks the pieces in order, a piece's lines from its start
          EXPECT_EQ(lines16.line(total), reinterpret_cast<const char*>(lines16.pieces.start[j])) << at;
          total += (s.kc * sw + 15) / 16;
        }
        EXPECT_EQ(lines16.lines, total) << at;
        EXPECT_EQ(lines16.line(total - 1),
                  reinterpret_cast<const char*>(lines16.pieces.start[lines16.pieces.n - 1]) +
                      64 * ((lines16.pieces.floats[lines16.pieces.n - 1] + 15) / 16 - 1))
            << at;
      }
      EXPECT_GT(slices, 0) << where;
    }
  }
}

// The slices of a product handed out as the threads ask (SliceQueue): each slice runs once,
// over its panel and its part of the row blocks; the k chunks of a panel and row part run in
// order, each after the one before is done (what keeps every output one fma chain over k in
// order); the weights a thread prefetches are those of the next slice it runs; and, where
// there are 24 slices or more, a slow thread runs fewer than a fixed third (thread 0 sleeps 5
// ms in each of its slices, the other two do not: it takes two slices at once, so with fewer
// slices it may hold a third of them before the others start). Row parts 1 and 3, with a
// narrow last panel.
TEST(LinearPacked, QueueRunsEachSliceOnceAfterItsPreviousChunk) {
  struct Case {
    int64_t N, K, chunk, parts;
  };
  for (const Case c : {Case{768, 3072, 384, 1}, Case{200, 1000, 384, 3}, Case{130, 768, 768, 1}}) {
    const std::string where = std::to_string(c.N) + "x" + std::to_string(c.K) + " chunk " +
                              std::to_string(c.chunk) + " parts " + std::to_string(c.parts);
    const int64_t blocks = 11;
    cpu::SliceQueue queue(c.K, c.N, c.chunk, blocks, c.parts);
    const int64_t panels = (c.N + cpu::kPanel - 1) / cpu::kPanel, columns = panels * c.parts;
    const std::vector<float> weights(c.N * c.K);  // addresses only: nothing is read
    const float* wp = weights.data();
    std::vector<std::atomic<int64_t>> runs(static_cast<size_t>(queue.slices()));
    std::vector<std::atomic<int64_t>> chunks_seen(static_cast<size_t>(columns));  // per panel and row part
    struct Ran {
      int64_t slice;
      const float* prefetch;
    };
    std::vector<Ran> ran[3];
    std::atomic<int> out_of_order{0};
#pragma omp parallel num_threads(3)
    {
      const int t = omp_get_thread_num();
      for (cpu::QueueWalk it(queue); it.more(); it.next()) {
        const cpu::PackedSlice& s = it.slice;
        const int64_t column = it.at % columns, part = column % c.parts;
        EXPECT_EQ(s.p, column / c.parts);
        EXPECT_EQ(s.share.r0, blocks * part / c.parts);
        EXPECT_EQ(s.share.r1, blocks * (part + 1) / c.parts);
        if (chunks_seen[size_t(column)].load() != s.k0 / c.chunk) ++out_of_order;
        ++runs[size_t(it.at)];
        ran[t].push_back({it.at, it.next_slice_lines(wp, 16).pieces.start[0]});
        if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        chunks_seen[size_t(column)].store(s.k0 / c.chunk + 1);
      }
    }
    EXPECT_EQ(out_of_order.load(), 0) << where << ": slices that ran before their previous chunk was done";
    for (int64_t i = 0; i < queue.slices(); ++i)
      EXPECT_EQ(runs[size_t(i)].load(), 1) << where << ", slice " << i;
    for (int t = 0; t < 3; ++t)
      for (size_t j = 0; j < ran[t].size(); ++j) {
        const float* want =
            j + 1 < ran[t].size() ? queue.weights(wp, 16, ran[t][j + 1].slice).start[0] : nullptr;
        EXPECT_EQ(ran[t][j].prefetch, want) << where << ", thread " << t << "'s slice " << ran[t][j].slice;
      }
    if (queue.slices() >= 24) {
      EXPECT_LT(int64_t(ran[0].size()), queue.slices() / 3) << where << ": the slow thread's share";
    }
    EXPECT_EQ(queue.slices(), columns * ((c.K + c.chunk - 1) / c.chunk)) << where;
  }
}

// fc1 and GELU in one pass on packed weights (applied as the outputs leave the registers,
// after the last k chunk) against the plain linear followed by the reference GELU, and bit
// for bit against the packed product followed by the GELU pass (the fused epilogue is the
// pass's formula); values spread over [-6, 6] reach both tails of erf; K = 1000 takes two
// chunks.
TEST(LinearPacked, GeluFusedMatchesLinearThenGelu) {
  struct Case {
    int64_t M, N, K;
  };
  for (const Case c : {Case{197, 128, 64}, Case{13, 50, 400}, Case{20, 200, 1000}}) {
    const std::string where = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K);
    const auto x = test::randn(c.M * c.K, 21, 1.f), w = test::randn(c.N * c.K, 22, 0.4f),
               b = test::randn(c.N, 23);
    std::vector<float> wp = w, got(c.M * c.N), want(c.M * c.N);
    cpu::linear_forward(want.data(), x.data(), w.data(), b.data(), c.M, c.K, c.N);
    cpu::gelu_forward_reference(want.data(), want.data(), c.M * c.N);
    cpu::pack_linear_weights(wp.data(), c.N, c.K);
    cpu::linear_forward_packed(got.data(), x.data(), wp.data(), b.data(), c.M, c.K, c.N, true);
    EXPECT_TRUE(
        test::close_rel_max("packed linear + gelu " + where, got.data(), want.data(), c.M * c.N, 1e-5));
    std::vector<float> pass(c.M * c.N);
    cpu::linear_forward_packed(pass.data(), x.data(), wp.data(), b.data(), c.M, c.K, c.N);
    cpu::gelu_forward(pass.data(), pass.data(), c.M * c.N);
    EXPECT_EQ(got, pass) << where << ": fused GELU against the GELU pass";
  }
}

}  // namespace vit

namespace vit {

namespace {
// x rounded to bf16 and widened back to fp32: the values the amp products multiply.
std::vector<float> as_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  cpu::round_to_bf16(b.data(), x.data(), int64_t(x.size()));
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t u = uint32_t(b[i]) << 16;
    std::memcpy(&r[i], &u, 4);
  }
  return r;
}
}  // namespace

// Mixed-precision training products (linear_forward_amp, linear_backward_amp): bf16 operands,
// fp32 accumulation. On the bf16-rounded values every product is exact in fp32, so against
// a double-precision reference on those values only the fp32 sums differ: 1e-5 of the
// largest output over K <= 300 terms (a wrong layout or transposition is off by O(1)). dw
// accumulates onto what it held (+=), db is the fp32 column sum of dy, as colsum_add. Run
// on two threads at once as the training lanes do (each execution its own scratchpad).
TEST(LinearAmp, ProductsOfTheRoundedValuesForwardAndBackward) {
  if (!cpu::bf16_matmul_available()) GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU";
  const int64_t K = 300, N = 70;
  for (const int64_t M : {int64_t(1), int64_t(37), int64_t(260)}) {
    const auto x = test::randn(M * K, 11), w = test::randn(N * K, 12), dy = test::randn(M * N, 13),
               b = test::randn(N, 14), dw0 = test::randn(N * K, 15), db0 = test::randn(N, 16);
    const auto xr = as_bf16(x), wr = as_bf16(w), dyr = as_bf16(dy);
    std::vector<uint16_t> xb(x.size()), wb(w.size());
    cpu::round_to_bf16(xb.data(), x.data(), M * K);
    cpu::round_to_bf16(wb.data(), w.data(), N * K);
    // References: y = xr wr^T + b, dx = dyr wr, dw = dw0 + dyr^T xr, db = db0 + colsum(dy).
    std::vector<float> y_want(M * N), dx_want(M * K), dw_want = dw0, db_want = db0;
    cpu::gemm_reference(false, true, M, N, K, 1.f, xr.data(), K, wr.data(), K, 0.f, y_want.data(), N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) y_want[i * N + j] += b[j];
    cpu::gemm_reference(false, false, M, K, N, 1.f, dyr.data(), N, wr.data(), K, 0.f, dx_want.data(), K);
    cpu::gemm_reference(true, false, N, K, M, 1.f, dyr.data(), N, xr.data(), K, 1.f, dw_want.data(), K);
    cpu::colsum_add(db_want.data(), dy.data(), M, N);
    run_on_threads(2, [&](int t) {
      const std::string where = "M=" + std::to_string(M) + " thread " + std::to_string(t);
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<float> y(M * N), dx(M * K, std::nanf("")), dw = dw0, db = db0;
        cpu::linear_forward_amp(y.data(), xb.data(), wb.data(), b.data(), M, K, N);
        cpu::linear_backward_amp(dx.data(), dw.data(), db.data(), dy.data(), xb.data(), wb.data(), M, K, N);
        EXPECT_TRUE(test::close_rel_max("amp y, " + where, y.data(), y_want.data(), M * N, 1e-5));
        EXPECT_TRUE(test::close_rel_max("amp dx, " + where, dx.data(), dx_want.data(), M * K, 1e-5));
        EXPECT_TRUE(test::close_rel_max("amp dw, " + where, dw.data(), dw_want.data(), N * K, 1e-5));
        EXPECT_EQ(db, db_want) << where;
      }
    });
  }
}

}  // namespace vit
