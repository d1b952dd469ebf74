// The kernel table (backends/cpu/kernel_set.h): every path this CPU runs, not only the one in
// use, against the generic table, entry by entry, as ggml's test-backend-ops compares every
// backend with the CPU reference. Copies, roundings and sums in a fixed order must give the
// generic bits; products in register blocks (another summation order, fused multiply-adds)
// must come within the stated tolerance.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "support/check.h"

namespace vit::cpu {

namespace {
// The tables of every path this CPU runs other than generic, with their names.
std::vector<std::pair<std::string, CpuKernels>> vector_paths() {
  std::vector<std::pair<std::string, CpuKernels>> v;
  for (Isa i : {Isa::avx2, Isa::avx512, Isa::neon})
    if (isa_supported(i)) v.emplace_back(isa_name(i), kernels_for(i));
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}
}  // namespace

TEST(KernelTable, EveryPathFillsEveryEntry) {
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::neon}) {
    if (!isa_supported(i)) continue;
    const CpuKernels k = kernels_for(i);
    EXPECT_TRUE(k.head_gemm && k.head_transpose && k.colsum_columns && k.round_to_bf16 && k.residual_run &&
                k.copy_patch_row_short && k.gelu_forward && k.gelu_backward && k.bias_gelu_rows &&
                k.act_rows && k.bias_gelu_backward && k.quantize_row_s8 && k.dequant_s8 && k.gemm_s8 &&
                k.gemm_s8_name)
        << isa_name(i);
    EXPECT_EQ(k.register_blocks, i != Isa::generic) << isa_name(i);
  }
  const CpuKernels generic = kernels_for(Isa::generic);
  EXPECT_EQ(generic.head_gemm, head_gemm_reference);
  EXPECT_EQ(generic.residual_run, residual_run_reference);
}

// head_gemm: C = alpha A B + beta C + bias, A plain and transposed, at block edges and tails.
TEST(KernelTable, HeadGemmOfEveryPathIsTheGenericWithinFloatRounding) {
  const CpuKernels g = kernels_for(Isa::generic);
  struct S {
    int64_t M, N, K;
  };
  for (const auto& [name, k] : vector_paths())
    for (S s : {S{1, 1, 1}, S{3, 5, 7}, S{8, 16, 32}, S{13, 33, 65}, S{6, 64, 197}})
      for (bool ta : {false, true})
        for (float beta : {0.f, 0.5f}) {
          const int64_t lda = ta ? s.M + 1 : s.K + 1, ldb = s.N + 2, ldc = s.N + 3;
          const auto A = test::randn(ta ? s.K * lda : s.M * lda, 1), B = test::randn(s.K * ldb, 2),
                     bias = test::randn(s.N, 3);
          std::vector<float> got = test::randn(s.M * ldc, 4), want = got;
          const int64_t ars = ta ? 1 : lda, aks = ta ? lda : 1;
          k.head_gemm(s.M, s.N, s.K, 0.7f, A.data(), ars, aks, B.data(), ldb, beta, bias.data(), got.data(),
                      ldc);
          g.head_gemm(s.M, s.N, s.K, 0.7f, A.data(), ars, aks, B.data(), ldb, beta, bias.data(), want.data(),
                      ldc);
          EXPECT_TRUE(test::close_rel_max(name + " head_gemm " + std::to_string(s.M) + "x" +
                                              std::to_string(s.N) + "x" + std::to_string(s.K) +
                                              (ta ? " A^T" : ""),
                                          got.data(), want.data(), s.M * ldc, 1e-5));
        }
}

// The entries that copy, round or sum in a fixed order: the generic bits.
TEST(KernelTable, CopiesRoundingsAndOrderedSumsOfEveryPathAreTheGenericBits) {
  const CpuKernels g = kernels_for(Isa::generic);
  for (const auto& [name, k] : vector_paths()) {
    for (int64_t rows : {1, 5, 17})
      for (int64_t cols : {1, 7, 8, 16, 19, 40}) {
        const auto src = test::randn(rows * (cols + 3), 5);
        std::vector<float> got(static_cast<size_t>(cols * (rows + 2)), 1.f), want = got;
        k.head_transpose(got.data(), rows + 2, src.data(), cols + 3, rows, cols);
        g.head_transpose(want.data(), rows + 2, src.data(), cols + 3, rows, cols);
        EXPECT_TRUE(same_bits(got, want)) << name << " head_transpose " << rows << "x" << cols;
      }
    for (int64_t n : {1, 15, 16, 17, 100}) {
      std::vector<float> x = test::randn(n, 6, 1e3f);
      if (n > 3) x[1] = NAN, x[2] = 1.00390625f /* a tie */, x[3] = -INFINITY;
      std::vector<uint16_t> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
      k.round_to_bf16(got.data(), x.data(), n);
      g.round_to_bf16(want.data(), x.data(), n);
      EXPECT_TRUE(same_bits(got, want)) << name << " round_to_bf16 n " << n;
      const auto a = test::randn(n, 7), b = test::randn(n, 8);
      std::vector<float> r(static_cast<size_t>(n)), rw(static_cast<size_t>(n));
      k.residual_run(r.data(), a.data(), b.data(), 1.25f, n);
      g.residual_run(rw.data(), a.data(), b.data(), 1.25f, n);
      EXPECT_TRUE(same_bits(r, rw)) << name << " residual_run n " << n;
    }
    struct P {
      int64_t C, H, W, Ph, Pw;
    };
    for (P p : {P{1, 28, 28, 4, 4}, P{3, 32, 32, 4, 4}, P{2, 8, 12, 4, 6}, P{3, 32, 48, 16, 16},
                P{1, 12, 40, 6, 10}}) {
      const int64_t Gw = p.W / p.Pw, K = p.C * p.Ph * p.Pw;
      const auto x = test::randn(2 * p.C * p.H * p.W, 9);
      std::vector<float> got(static_cast<size_t>(Gw * K), -1.f), want = got;
      k.copy_patch_row_short(got.data(), x.data(), 1, 1, p.C, p.H, p.W, p.Ph, p.Pw, Gw);
      g.copy_patch_row_short(want.data(), x.data(), 1, 1, p.C, p.H, p.W, p.Ph, p.Pw, Gw);
      EXPECT_TRUE(same_bits(got, want)) << name << " copy_patch_row_short " << p.Pw;
    }
  }
}

// Column sums: each column's rows in order from zero on every path but AVX-512, whose narrow
// sums go in row phases (test_simd's ColumnSums tests): within float rounding there.
TEST(KernelTable, ColumnSumsOfEveryPathAreTheGenericOnes) {
  const CpuKernels g = kernels_for(Isa::generic);
  for (const auto& [name, k] : vector_paths())
    for (int64_t M : {1, 7, 64, 197})
      for (int64_t N : {1, 9, 16, 40, 192}) {
        const auto dy = test::randn(M * N, 10);
        std::vector<float> got = test::randn(N, 11), want = got;
        k.colsum_columns(got.data(), dy.data(), M, N, 0, N);
        g.colsum_columns(want.data(), dy.data(), M, N, 0, N);
        if (name == "avx512")
          EXPECT_TRUE(test::close_rel_max(name + " colsum", got.data(), want.data(), N, 1e-5));
        else
          EXPECT_TRUE(same_bits(got, want)) << name << " colsum_columns " << M << "x" << N;
      }
}

// The activations: the vector paths' erf, exp and tanh approximations against std's, within
// 1e-5 of the largest value (their stated bounds are a few ulp: avx512/simd.h); the
// backward's dx = dy grad is one product, the same bits, and its column sums within rounding.
TEST(KernelTable, ActivationsOfEveryPathAreTheGenericWithinTheirApproximations) {
  const CpuKernels g = kernels_for(Isa::generic);
  const int64_t M = 7, N = 37, n = M * N;
  const auto x = test::randn(n, 12, 2.f), dy = test::randn(n, 13), bias = test::randn(N, 14);
  for (const auto& [name, k] : vector_paths()) {
    std::vector<float> y(static_cast<size_t>(n)), yw(y.size());
    k.gelu_forward(y.data(), x.data(), 0, n);
    g.gelu_forward(yw.data(), x.data(), 0, n);
    EXPECT_TRUE(test::close_rel_max(name + " gelu_forward", y.data(), yw.data(), n, 1e-5));
    k.gelu_backward(y.data(), dy.data(), x.data(), 0, n);
    g.gelu_backward(yw.data(), dy.data(), x.data(), 0, n);
    EXPECT_TRUE(test::close_rel_max(name + " gelu_backward", y.data(), yw.data(), n, 1e-5));
    std::vector<float> h = x, hw = x;
    k.bias_gelu_rows(y.data(), h.data(), bias.data(), N, 0, M, true);
    g.bias_gelu_rows(yw.data(), hw.data(), bias.data(), N, 0, M, true);
    EXPECT_TRUE(test::close_rel_max(name + " bias_gelu_rows y", y.data(), yw.data(), n, 1e-5));
    EXPECT_TRUE(test::close_rel_max(name + " bias_gelu_rows grad", h.data(), hw.data(), n, 1e-5));
    for (Activation act : {Activation::gelu_tanh, Activation::quick_gelu}) {
      h = x, hw = x;
      k.act_rows(y.data(), h.data(), bias.data(), N, 0, M, true, act);
      g.act_rows(yw.data(), hw.data(), bias.data(), N, 0, M, true, act);
      EXPECT_TRUE(test::close_rel_max(name + " act_rows y", y.data(), yw.data(), n, 1e-5));
      EXPECT_TRUE(test::close_rel_max(name + " act_rows grad", h.data(), hw.data(), n, 1e-5));
    }
    h = x, hw = x;
    std::vector<float> db = test::randn(N, 15), dbw = db;
    k.bias_gelu_backward(y.data(), db.data(), dy.data(), h.data(), M, N, true);
    g.bias_gelu_backward(yw.data(), dbw.data(), dy.data(), hw.data(), M, N, true);
    EXPECT_TRUE(same_bits(y, yw)) << name << " bias_gelu_backward dx";
    EXPECT_TRUE(same_bits(h, hw)) << name << " bias_gelu_backward clears grad";
    EXPECT_TRUE(test::close_rel_max(name + " bias_gelu_backward db", db.data(), dbw.data(), N, 1e-5));
  }
}

}  // namespace vit::cpu
