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
#include "backends/cpu/linear_packed.h"
#include "ops/kernel_paths.h"
#include "support/check.h"

namespace vit::cpu {

TEST(KernelTable, EveryPathFillsEveryEntry) {
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::neon}) {
    if (!isa_supported(i)) continue;
    const CpuKernels k = kernels_for(i);
    EXPECT_TRUE(k.head_gemm && k.head_transpose && k.colsum_columns && k.round_to_bf16 && k.residual_run &&
                k.copy_patch_row_short && k.gelu_forward && k.gelu_backward && k.bias_gelu_rows &&
                k.act_rows && k.bias_gelu_backward && k.quantize_row_s8 && k.dequant_s8 && k.gemm_s8 &&
                k.gemm_s8_name && k.layernorm_rows && k.layernorm_dx_rows && k.layernorm_param_grads &&
                k.softmax_rows && k.softmax_backward_rows && k.exp_nonpos && k.linear_forward_packed &&
                k.packed_slice > 0)
        << isa_name(i);
    EXPECT_EQ(k.register_blocks, i != Isa::generic) << isa_name(i);
    // What every vector path has and generic has not.
    const bool vector = i != Isa::generic;
    EXPECT_EQ(vector, k.skinny_gemm && k.attention_backward_narrow_fits && k.attention_backward_narrow &&
                          k.attention_lanes.fit && k.attention_lanes.run && k.attention_lanes.group > 0)
        << isa_name(i);
    EXPECT_EQ(!k.layernorm_one_pass_fits, !k.layernorm_backward_one_pass) << isa_name(i);
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

// LayerNorm's row and column kernels, and the one-pass backward where a path has it, against
// the generic loops: other summation orders, so within float rounding. C = 8 and 16 take the
// paths' transposed-row kernels, 192 and 197 their vector loops with and without a tail.
TEST(KernelTable, LayerNormOfEveryPathIsTheGenericWithinFloatRounding) {
  const CpuKernels g = kernels_for(Isa::generic);
  for (const auto& [name, k] : vector_paths())
    for (int64_t M : {1, 5, 19})
      for (int64_t C : {8, 16, 40, 192, 197}) {
        const std::string at = name + " M " + std::to_string(M) + " C " + std::to_string(C);
        const int64_t n = M * C;
        const auto x = test::randn(n, 20, 2.f), w = test::randn(C, 21), b = test::randn(C, 22),
                   dy = test::randn(n, 23);
        std::vector<float> y(static_cast<size_t>(n)), yw(y.size()), m(static_cast<size_t>(M)), mw(m.size()),
            r(m.size()), rw(m.size());
        k.layernorm_rows(y.data(), m.data(), r.data(), x.data(), w.data(), b.data(), 0, M, C, 1e-6f);
        g.layernorm_rows(yw.data(), mw.data(), rw.data(), x.data(), w.data(), b.data(), 0, M, C, 1e-6f);
        EXPECT_TRUE(test::close_rel_max(at + " layernorm_rows y", y.data(), yw.data(), n, 1e-5));
        EXPECT_TRUE(test::close_rel_max(at + " layernorm_rows rstd", r.data(), rw.data(), M, 1e-5));
        for (bool acc : {false, true}) {
          std::vector<float> dx = test::randn(n, 24), dxw = dx;
          k.layernorm_dx_rows(dx.data(), dy.data(), x.data(), mw.data(), rw.data(), w.data(), 0, M, C, acc);
          g.layernorm_dx_rows(dxw.data(), dy.data(), x.data(), mw.data(), rw.data(), w.data(), 0, M, C, acc);
          EXPECT_TRUE(test::close_rel_max(at + " layernorm_dx_rows", dx.data(), dxw.data(), n, 1e-5));
        }
        std::vector<float> dw = test::randn(C, 25), db = test::randn(C, 26), dww = dw, dbw = db;
        k.layernorm_param_grads(dw.data(), db.data(), dy.data(), x.data(), mw.data(), rw.data(), M, C, 0, C);
        g.layernorm_param_grads(dww.data(), dbw.data(), dy.data(), x.data(), mw.data(), rw.data(), M, C, 0,
                                C);
        EXPECT_TRUE(test::close_rel_max(at + " layernorm_param_grads dw", dw.data(), dww.data(), C, 1e-5));
        EXPECT_TRUE(test::close_rel_max(at + " layernorm_param_grads db", db.data(), dbw.data(), C, 1e-5));
        if (!k.layernorm_backward_one_pass || !k.layernorm_one_pass_fits(C)) continue;
        // One pass: dx, dw, db and dxsum's column sums of dx, as the passes give them.
        std::vector<float> dx(static_cast<size_t>(n)), dxw(dx.size()), sum(static_cast<size_t>(C), 0.f),
            sumw = sum;
        dw = dww = std::vector<float>(static_cast<size_t>(C), 0.f), db = dbw = dw;
        k.layernorm_backward_one_pass(dx.data(), dw.data(), db.data(), sum.data(), dy.data(), x.data(),
                                      mw.data(), rw.data(), w.data(), M, C, false);
        g.layernorm_dx_rows(dxw.data(), dy.data(), x.data(), mw.data(), rw.data(), w.data(), 0, M, C, false);
        g.layernorm_param_grads(dww.data(), dbw.data(), dy.data(), x.data(), mw.data(), rw.data(), M, C, 0,
                                C);
        g.colsum_columns(sumw.data(), dxw.data(), M, C, 0, C);
        EXPECT_TRUE(test::close_rel_max(at + " one pass dx", dx.data(), dxw.data(), n, 1e-5));
        EXPECT_TRUE(test::close_rel_max(at + " one pass dw", dw.data(), dww.data(), C, 1e-5));
        EXPECT_TRUE(test::close_rel_max(at + " one pass db", db.data(), dbw.data(), C, 1e-5));
        EXPECT_TRUE(test::close_rel_max(at + " one pass dxsum", sum.data(), sumw.data(), C, 1e-4));
      }
}

namespace {
// w[N, K] packed for a path whose stored slices are S columns wide (linear_packed.h): each
// 64-row panel as slices [K, s], s = S or what is left of the panel.
std::vector<float> packed_for(const std::vector<float>& w, int64_t N, int64_t K, int64_t S) {
  std::vector<float> p(w.size());
  for (int64_t n0 = 0; n0 < N; n0 += kPanel)
    for (int64_t c0 = 0; c0 < panel_width(N, n0); c0 += S) {
      const int64_t s = std::min(S, panel_width(N, n0) - c0);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < s; ++j)
          p[size_t(n0 * K + c0 * K + k * s + j)] = w[size_t((n0 + c0 + j) * K + k)];
    }
  return p;
}
}  // namespace

// The products a path has beyond head_gemm: skinny products (the path's head_gemm bits, and
// so the generic within rounding), the tiled product (gemm_chain_reference's bits), and the
// packed linear layer on the path's own slice width (the plain product within rounding).
TEST(KernelTable, ProductsOfEveryPathAreTheGenericWithinFloatRounding) {
  const CpuKernels g = kernels_for(Isa::generic);
  for (const auto& [name, k] : vector_paths()) {
    int taken = 0;
    for (int64_t N : {3, 8, 24, 32})
      for (int64_t K : {8, 16, 24, 32, 40}) {
        const int64_t M = 29, lda = K + 1, ldb = N + 2, ldc = N + 3;
        const auto A = test::randn(M * lda, 30), B = test::randn(K * ldb, 31), bias = test::randn(N, 32);
        std::vector<float> got = test::randn(M * ldc, 33), own = got, want = got;
        if (!k.skinny_gemm(M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.25f, bias.data(), got.data(), ldc))
          continue;
        ++taken;
        k.head_gemm(M, N, K, 0.5f, A.data(), lda, 1, B.data(), ldb, 0.25f, bias.data(), own.data(), ldc);
        g.head_gemm(M, N, K, 0.5f, A.data(), lda, 1, B.data(), ldb, 0.25f, bias.data(), want.data(), ldc);
        EXPECT_TRUE(same_bits(got, own))
            << name << " skinny_gemm " << N << "x" << K << ": not head_gemm's bits";
        EXPECT_TRUE(test::close_rel_max(name + " skinny_gemm", got.data(), want.data(), M * ldc, 1e-5));
      }
    EXPECT_GT(taken, 8) << name << ": skinny_gemm took too few of the shapes";
    if (k.tiled_gemm)
      for (bool tb : {false, true}) {
        const int64_t M = 37, N = 70, K = 45, ldb = tb ? K : N;
        const auto A = test::randn(M * K, 34), B = test::randn((tb ? N : K) * ldb, 35),
                   bias = test::randn(N, 36);
        std::vector<float> got = test::randn(M * N, 37), want = got;
        k.tiled_gemm(tb, M, N, K, A.data(), K, B.data(), ldb, 1.f, got.data(), N, 1, nullptr);
        gemm_chain_reference(false, tb, M, N, K, A.data(), K, B.data(), ldb, 1.f, want.data(), N);
        EXPECT_TRUE(same_bits(got, want)) << name << " tiled_gemm" << (tb ? " B^T" : "");
      }
    for (int64_t N : {16, 70, 192})
      for (bool gelu : {false, true}) {
        const int64_t M = 13, K = 40;
        const auto x = test::randn(M * K, 38), w = test::randn(N * K, 39), b = test::randn(N, 40);
        const auto wp = packed_for(w, N, K, k.packed_slice);
        std::vector<float> got(static_cast<size_t>(M * N)), want(got.size());
        k.linear_forward_packed(got.data(), x.data(), wp.data(), b.data(), M, K, N, gelu);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            float s = b[j];
            for (int64_t kk = 0; kk < K; ++kk) s += x[i * K + kk] * w[j * K + kk];
            want[size_t(i * N + j)] = s;
          }
        if (gelu) g.gelu_forward(want.data(), want.data(), 0, M * N);
        EXPECT_TRUE(test::close_rel_max(
            name + " linear_forward_packed N " + std::to_string(N) + (gelu ? " gelu" : ""), got.data(),
            want.data(), M * N, 1e-5));
      }
  }
}

}  // namespace vit::cpu
