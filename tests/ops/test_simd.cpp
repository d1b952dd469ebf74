// The element-wise and attention kernels of the path in use against their plain reference
// versions: GELU forward and backward, attention's softmax and its backward, LayerNorm
// forward and backward, the per-head products, the attention core. scripts/test_isa.sh runs
// them on every path the CPU has. Sizes include tails that are not a multiple of the lanes.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "core/check.h"
#include "core/rng.h"
#include "ops/ops.h"
#include "support/check.h"

namespace vit {

namespace {
// |got - want| <= tol * (1 + |x|) for every element: erf's absolute error bound (1.5e-7)
// scaled by GELU's factor x, plus float rounding.
::testing::AssertionResult close_abs_scaled(const char* what, const std::vector<float>& got,
                                            const std::vector<float>& want, const std::vector<float>& x,
                                            double tol) {
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]), lim = tol * (1 + std::fabs(x[i]));
    if (!(d <= lim))
      return ::testing::AssertionFailure() << what << ": at x = " << x[i] << " got " << got[i] << ", want "
                                           << want[i] << ", |diff| " << d << " > " << lim;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

// The softmax kernels' exp (exp512_nonpos, avx2's exp_nonpos, std::exp: the path in use) on
// x <= 0 against exp in double: relative error <= 2e-7 (~2 ulp, what the Cephes expf it
// replaced gave); 0 below -87.3 and for -inf, NaN stays NaN. The worst case is printed.
TEST(Simd, ExpNonPositiveWithinItsBound) {
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i) x.push_back(-87.3f * float(i) / 200000.f);
  for (float v : {0.f, -0.f, -1e-30f, -0.5f, -0.3465736f, -0.3465737f, -1.f, -87.3365f, -87.34f, -100.f,
                  -std::numeric_limits<float>::infinity(), std::nanf("")})
    x.push_back(v);
  x.push_back(-1.f);  // 200014 values: a tail of 14 lanes (AVX-512), 6 (AVX2)
  std::vector<float> got(x.size());
  cpu::exp_nonpos(got.data(), x.data(), int64_t(x.size()));
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "exp(NaN) gave " << got[i];
      continue;
    }
    if (x[i] < -87.3365f) {
      EXPECT_EQ(got[i], 0.f) << "exp(" << x[i] << ") below the cut-off";
      continue;
    }
    const double want = std::exp(double(x[i])), err = std::fabs(got[i] - want) / want;
    EXPECT_LE(err, 2e-7) << "exp(" << x[i] << ") = " << got[i] << ", want " << want;
    if (err > worst) worst = err, worst_x = x[i];
  }
  std::printf("exp_nonpos (%s): worst relative error %.3g, at x = %g\n", cpu::isa_name(cpu::isa()), worst,
              worst_x);
}

// A vector kernel's tail (the lanes past the last whole vector) writes its n floats and not
// one past them, for every tail length: on AVX2 the tail goes in SSE pieces (avx2/simd.h).
TEST(Simd, TailsWriteTheirFloatsAndNoMore) {
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> x(size_t(n) + 1, 0.f), y(size_t(n) + 24, 42.f);
    x[size_t(n)] = -1.f;  // past n: must not be read into y
    cpu::exp_nonpos(y.data(), x.data(), n);
    for (int64_t i = 0; i < n + 24; ++i)
      ASSERT_EQ(y[size_t(i)], i < n ? 1.f : 42.f) << "n = " << n << ", float " << i;
  }
}

TEST(Simd, GeluMatchesReference) {
  std::vector<float> x = test::randn(4103, 11, 3.f);  // 4103: a 7-lane tail
  for (float v : {0.f, 1e-4f, -1e-4f, 5.f, -5.f, 10.f, -10.f, 30.f, -30.f}) x.push_back(v);
  const int64_t n = int64_t(x.size());
  std::vector<float> got(n), want(n), dy = test::randn(n, 12), dgot(n), dwant(n);
  cpu::gelu_forward(got.data(), x.data(), n);
  cpu::gelu_forward_reference(want.data(), x.data(), n);
  EXPECT_TRUE(close_abs_scaled("gelu forward", got, want, x, 3e-7));
  cpu::gelu_backward(dgot.data(), dy.data(), x.data(), n);
  cpu::gelu_backward_reference(dwant.data(), dy.data(), x.data(), n);
  // dy is unit-scale: the same bound times |dy| <= ~4.
  EXPECT_TRUE(close_abs_scaled("gelu backward", dgot, dwant, x, 1.5e-6));
}

// fc1's bias folded into the GELU pass: y = GELU(h + bias) within GELU's bound, every row
// getting the same bias, tails included; h left alone at inference, and in training set to
// GELU'(h + bias) exactly as gelu_backward computes it (dy = 1), so that the backward from
// it gives the same bits as gelu_backward on h + bias then colsum_add, on narrow (row
// phases) and wide (column blocks) matrices, on 1 and 2 threads; db accumulates.
TEST(Simd, BiasGeluKeepsTheDerivativeTheBackwardNeeds) {
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2}) {
    omp_set_num_threads(nt);
    for (int64_t N : {8, 32, 100, 768}) {
      const int64_t M = 301;
      const std::vector<float> h0 = test::randn(M * N, uint64_t(N), 2.f),
                               bias = test::randn(N, uint64_t(N) + 1);
      const std::vector<float> dy = test::randn(M * N, 8), db0 = test::randn(N, 9);
      std::vector<float> v(M * N), want(M * N), ones(M * N, 1.f), want_grad(M * N), got(M * N);
      for (int64_t i = 0; i < M * N; ++i) v[i] = h0[i] + bias[i % N];
      cpu::gelu_forward_reference(want.data(), v.data(), M * N);
      cpu::gelu_backward(want_grad.data(), ones.data(), v.data(), M * N);
      const std::string where = "N = " + std::to_string(N) + ", " + std::to_string(nt) + " threads";

      std::vector<float> h = h0;
      cpu::bias_gelu_forward(got.data(), h.data(), bias.data(), M, N, false);
      EXPECT_TRUE(close_abs_scaled("bias_gelu y", got, want, v, 3e-7)) << where;
      EXPECT_TRUE(test::close_rel_max("bias_gelu h at inference, " + where, h.data(), h0.data(), M * N, 0.0));
      cpu::bias_gelu_forward(got.data(), h.data(), bias.data(), M, N, true);
      EXPECT_TRUE(close_abs_scaled("bias_gelu y (training)", got, want, v, 3e-7)) << where;
      EXPECT_TRUE(
          test::close_rel_max("bias_gelu derivative, " + where, h.data(), want_grad.data(), M * N, 0.0));

      std::vector<float> dx_want(M * N), db_want = db0, dx_got = dy, db_got = db0;
      cpu::gelu_backward(dx_want.data(), dy.data(), v.data(), M * N);
      cpu::colsum_add(db_want.data(), dx_want.data(), M, N);
      cpu::bias_gelu_backward(dx_got.data(), db_got.data(), dx_got.data(), h.data(), M, N);  // in place
      EXPECT_TRUE(
          test::close_rel_max("bias_gelu_backward dx, " + where, dx_got.data(), dx_want.data(), M * N, 0.0));
      EXPECT_TRUE(
          test::close_rel_max("bias_gelu_backward db, " + where, db_got.data(), db_want.data(), N, 0.0));
      // Clearing the derivative as it is read (for the next forward's fc1): the same dx and
      // db, and grad all zeros.
      dx_got = dy, db_got = db0;
      cpu::bias_gelu_backward(dx_got.data(), db_got.data(), dx_got.data(), h.data(), M, N, true);
      EXPECT_TRUE(test::close_rel_max("bias_gelu_backward dx, clearing, " + where, dx_got.data(),
                                      dx_want.data(), M * N, 0.0));
      EXPECT_TRUE(test::close_rel_max("bias_gelu_backward db, clearing, " + where, db_got.data(),
                                      db_want.data(), N, 0.0));
      EXPECT_EQ(std::count(h.begin(), h.end(), 0.f), M * N) << "derivative not cleared, " << where;
    }
  }
  omp_set_num_threads(saved);
}

// The MLP's other activations (cpu::act_forward, cpu::bias_act_forward): GELU's tanh form
// (PyTorch's F.gelu(approximate='tanh')) and QuickGELU (x sigmoid(1.702 x)) against their
// formulas in double, over [-10, 10] where tanh and exp saturate; the kept derivative against
// the formula's derivative in double and its central difference; y the same bits with and
// without keep_grad, and the bias added per column. Tolerances: float evaluation of tanh/exp,
// 2e-6 of max(1, |y|) and of max(1, |y'|).
TEST(Activation, TanhGeluAndQuickGeluMatchTheirFormulasAndDerivatives) {
  auto formula = [](Activation a, double v) {
    if (a == Activation::quick_gelu) return v / (1 + std::exp(-1.702 * v));
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  for (Activation a : {Activation::gelu_tanh, Activation::quick_gelu}) {
    const int64_t M = 41, N = 49;
    std::vector<float> h(M * N), bias = test::randn(N, 5, 0.5f);
    for (int64_t i = 0; i < M * N; ++i) h[i] = -10.f + 20.f * float(i) / float(M * N - 1) - bias[i % N];
    std::vector<float> y(M * N), y2(M * N), v(M * N), ya(M * N), kept = h;
    for (int64_t i = 0; i < M * N; ++i) v[i] = h[i] + bias[i % N];
    cpu::bias_act_forward(y.data(), kept.data(), bias.data(), M, N, true, a);
    std::vector<float> same = h;
    cpu::bias_act_forward(y2.data(), same.data(), bias.data(), M, N, false, a);
    cpu::act_forward(ya.data(), v.data(), M * N, a);
    EXPECT_EQ(y, y2) << activation_name(a);
    EXPECT_EQ(y, ya) << activation_name(a);
    EXPECT_EQ(same, h) << "h changed at inference";
    double worst_y = 0, worst_d = 0, worst_fd = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      const double x = v[i], fy = formula(a, x), eps = 1e-4;
      const double fd = (formula(a, x + eps) - formula(a, x - eps)) / (2 * eps);
      double d;
      if (a == Activation::quick_gelu) {
        const double s = 1 / (1 + std::exp(-1.702 * x));
        d = s + 1.702 * x * s * (1 - s);
      } else {
        const double c = std::sqrt(2 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
      }
      worst_y = std::max(worst_y, std::abs(y[i] - fy) / std::max(1.0, std::abs(fy)));
      worst_d = std::max(worst_d, std::abs(kept[i] - d) / std::max(1.0, std::abs(d)));
      worst_fd = std::max(worst_fd, std::abs(d - fd));
    }
    std::printf("%s (%s): worst error of y %.3g, of the kept derivative %.3g\n", activation_name(a),
                cpu::isa_name(cpu::isa()), worst_y, worst_d);
    EXPECT_LT(worst_y, 2e-6) << activation_name(a) << ": worst relative error of y";
    EXPECT_LT(worst_d, 2e-6) << activation_name(a) << ": worst relative error of the kept derivative";
    EXPECT_LT(worst_fd, 1e-6) << activation_name(a)
                              << ": the derivative's formula against its central difference";
  }
}

// The fused backward (one pass: dx = dy * grad and db += dx's column sums) against the
// multiply followed by colsum_add, bit for bit, on the shapes its kernels branch on: blocks
// of 1 to 8 vectors in registers (N = 1 to 64, tails of every width), wider ones through a
// buffer, one row, a few rows, dx apart from dy and in place, clearing grad or not. On the
// thread count in use (one under qemu; scripts/test_aarch64.sh).
TEST(Simd, BiasGeluBackwardIsTheMultiplyThenColumnSums) {
  for (int64_t M : {1, 2, 7, 301})
    for (int64_t N : {1, 3, 7, 8, 13, 17, 24, 31, 33, 40, 57, 64, 65, 100, 129, 389}) {
      const std::vector<float> dy = test::randn(M * N, uint64_t(7 * N + M)),
                               grad = test::randn(M * N, uint64_t(N + 3)), db0 = test::randn(N, 5);
      std::vector<float> dx_want(M * N), db_want = db0;
      for (int64_t i = 0; i < M * N; ++i) dx_want[i] = dy[i] * grad[i];
      cpu::colsum_add(db_want.data(), dx_want.data(), M, N);
      for (bool in_place : {false, true})
        for (bool clear : {false, true}) {
          const std::string where = "M = " + std::to_string(M) + ", N = " + std::to_string(N) +
                                    (in_place ? ", in place" : "") + (clear ? ", clearing" : "");
          std::vector<float> dx(M * N, 7.f), db = db0, g = grad, dyc = dy;
          float* out = in_place ? dyc.data() : dx.data();
          cpu::bias_gelu_backward(out, db.data(), dyc.data(), g.data(), M, N, clear);
          EXPECT_TRUE(test::close_rel_max("fused dx, " + where, out, dx_want.data(), M * N, 0.0));
          EXPECT_TRUE(test::close_rel_max("fused db, " + where, db.data(), db_want.data(), N, 0.0));
          if (!in_place) {
            EXPECT_EQ(dyc, dy) << "dy written, " << where;
          }
          if (clear) {
            EXPECT_EQ(std::count(g.begin(), g.end(), 0.f), M * N) << "grad not cleared, " << where;
          } else {
            EXPECT_EQ(g, grad) << "grad written, " << where;
          }
        }
    }
}

TEST(Simd, SoftmaxRowsMatchReference) {
  for (int64_t n : {5, 16, 50, 65, 197}) {
    const int64_t rows = 13;  // rows go in groups of 8, then 4, then 1
    std::vector<float> s = test::randn(rows * n, uint64_t(n), 4.f);
    std::vector<uint8_t> km(n, 1);
    for (int64_t j = 1; j < n; j += 3) km[j] = 0;  // every third key masked
    for (const uint8_t* mask : {(const uint8_t*)nullptr, (const uint8_t*)km.data()}) {
      std::vector<float> got = s, want = s;
      cpu::softmax_rows(got.data(), rows, n, mask);
      cpu::softmax_rows_reference(want.data(), rows, n, mask);
      // Probabilities in [0, 1]; exp is ~2 ulp and the sum's order differs: 1e-6 absolute.
      EXPECT_TRUE(test::close_rel_max("softmax n=" + std::to_string(n), got.data(), want.data(), rows * n,
                                      1e-6, 1.0));
      if (mask) {
        for (int64_t j = 1; j < n; j += 3) ASSERT_EQ(got[j], 0.f) << "masked key " << j << " got probability";
      }
      std::vector<float> d = test::randn(rows * n, 99), dgot = d, dwant = d;
      cpu::softmax_backward_rows(dgot.data(), want.data(), rows, n);
      cpu::softmax_backward_rows_reference(dwant.data(), want.data(), rows, n);
      EXPECT_TRUE(test::close_rel_max("softmax backward n=" + std::to_string(n), dgot.data(), dwant.data(),
                                      rows * n, 1e-5));
      // A row's bits do not depend on the rows beside it (the groups are interleaved passes).
      std::vector<float> one = s, done = d;
      for (int64_t r = 0; r < rows; ++r) {
        cpu::softmax_rows(one.data() + r * n, 1, n, mask);
        cpu::softmax_backward_rows(done.data() + r * n, want.data() + r * n, 1, n);
      }
      EXPECT_TRUE(test::close_rel_max("softmax row alone n=" + std::to_string(n), got.data(), one.data(),
                                      rows * n, 0.0));
      EXPECT_TRUE(test::close_rel_max("softmax backward row alone n=" + std::to_string(n), dgot.data(),
                                      done.data(), rows * n, 0.0));
    }
  }
  std::vector<float> all_masked(13 * 20, 1.f);
  std::vector<uint8_t> none(20, 0);
  cpu::softmax_rows(all_masked.data(), 13, 20, none.data());
  for (float p : all_masked) EXPECT_EQ(p, 0.f) << "a row with every key masked is all zeros";
}

TEST(Simd, LayerNormMatchesReference) {
  // C <= 16 runs 16 rows at a time transposed (3, 8, 16; 37 rows: two blocks and a tail),
  // wider rows one at a time in vectors (17, 192, 200).
  for (int64_t C : {3, 8, 16, 17, 192, 200}) {
    const int64_t M = 37;
    const std::string at = " C=" + std::to_string(C);
    auto x = test::randn(M * C, 1, 2.f), w = test::randn(C, 2), b = test::randn(C, 3),
         dy = test::randn(M * C, 4);
    for (int64_t c = 0; c < C; ++c) x[c] += 100.f;  // a row far from zero: the two-pass variance matters
    std::vector<float> y(M * C), yr(M * C), m(M), mr(M), r(M), rr(M);
    cpu::layernorm_forward(y.data(), m.data(), r.data(), x.data(), w.data(), b.data(), M, C, 1e-6f);
    cpu::layernorm_forward_reference(yr.data(), mr.data(), rr.data(), x.data(), w.data(), b.data(), M, C,
                                     1e-6f);
    // Sums of C floats in a different order: ~1e-6 relative to the output's scale, except the
    // +100 row, where both float sums lose digits: there, both are judged against doubles.
    const int64_t r0 = C;  // rows after the first
    EXPECT_TRUE(test::close_rel_max("layernorm y" + at, y.data() + r0, yr.data() + r0, (M - 1) * C, 1e-5));
    {
      double mu = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mu += x[c];
      mu /= double(C);
      for (int64_t c = 0; c < C; ++c) var += (x[c] - mu) * (x[c] - mu);
      const double rs = 1 / std::sqrt(var / double(C) + 1e-6);
      double err = 0, err_ref = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double want = (x[c] - mu) * rs * w[c] + b[c];
        err = std::max(err, std::fabs(y[c] - want));
        err_ref = std::max(err_ref, std::fabs(yr[c] - want));
      }
      // x ~ 100 carries ~4e-6 absolute rounding per element; the centered values are ~2.
      EXPECT_LE(err, std::max(2 * err_ref, 1e-4)) << "row at +100" << at << ": reference's error " << err_ref;
      std::printf("layernorm row at +100, C=%lld: max error vs double: fast %.3g, reference %.3g\n",
                  (long long)C, err, err_ref);
    }
    EXPECT_TRUE(test::close_rel_max("layernorm mean" + at, m.data(), mr.data(), M, 1e-6));
    EXPECT_TRUE(test::close_rel_max("layernorm rstd" + at, r.data(), rr.data(), M, 1e-5));
    for (bool acc : {false, true}) {
      std::vector<float> dx(M * C, 0.5f), dxr(M * C, 0.5f), dw(C, 0.f), dwr(C, 0.f), db(C, 0.f), dbr(C, 0.f);
      cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), mr.data(), rr.data(),
                              w.data(), M, C, acc);
      cpu::layernorm_backward_reference(dxr.data(), dwr.data(), dbr.data(), dy.data(), x.data(), mr.data(),
                                        rr.data(), w.data(), M, C, acc);
      EXPECT_TRUE(test::close_rel_max("layernorm dx" + at, dx.data(), dxr.data(), M * C, 1e-5));
      EXPECT_TRUE(test::close_rel_max("layernorm dw" + at, dw.data(), dwr.data(), C, 1e-6));
      EXPECT_TRUE(test::close_rel_max("layernorm db" + at, db.data(), dbr.data(), C, 1e-6));
    }
    // Without dx (an input that takes no gradient: vit-pytorch's patch LayerNorm): dw and db
    // accumulate as with it.
    std::vector<float> dw(C, 0.25f), dwr(C, 0.25f), db(C, -0.5f), dbr(C, -0.5f), dxr(M * C);
    cpu::layernorm_backward(nullptr, dw.data(), db.data(), dy.data(), x.data(), mr.data(), rr.data(),
                            w.data(), M, C, false);
    cpu::layernorm_backward_reference(dxr.data(), dwr.data(), dbr.data(), dy.data(), x.data(), mr.data(),
                                      rr.data(), w.data(), M, C, false);
    EXPECT_TRUE(test::close_rel_max("layernorm dw without dx" + at, dw.data(), dwr.data(), C, 1e-6));
    EXPECT_TRUE(test::close_rel_max("layernorm db without dx" + at, db.data(), dbr.data(), C, 1e-6));
  }
}

}  // namespace vit

namespace vit {

// Attention's per-head products on the path in use (scripts/test_isa.sh runs every path):
// every shape class the register blocks have (rows in blocks and a remainder, 1-4 vectors of
// columns with a masked tail, K from 1 up), A read plain and transposed, with leading
// dimensions wider than the matrices as qkv's 3C rows are, with and without beta and bias.
TEST(Simd, HeadGemmMatchesReference) {
  struct S {
    int64_t M, N, K;
  };
  for (S s : {S{50, 50, 4}, S{50, 4, 50}, S{65, 65, 16}, S{65, 16, 65}, S{197, 64, 197}, S{7, 130, 3},
              S{13, 33, 5}, S{1, 1, 1}, S{25, 80, 50}}) {
    for (bool ta : {false, true})
      for (bool beta_bias : {false, true}) {  // C = alpha A B, or alpha A B + 0.5 C + bias
        const int64_t lda = (ta ? s.M : s.K) + 5, ldb = s.N + 3, ldc = s.N + 7;
        auto A = test::randn((ta ? s.K : s.M) * lda, 1), B = test::randn(s.K * ldb, 2),
             bias = test::randn(s.N, 3);
        std::vector<float> got(s.M * ldc, 9.f), want(s.M * ldc, 9.f);
        const float beta = beta_bias ? 0.5f : 0.f;
        cpu::head_gemm(s.M, s.N, s.K, 0.25f, A.data(), ta ? 1 : lda, ta ? lda : 1, B.data(), ldb, beta,
                       beta_bias ? bias.data() : nullptr, got.data(), ldc);
        cpu::gemm_reference(ta, false, s.M, s.N, s.K, 0.25f, A.data(), lda, B.data(), ldb, beta, want.data(),
                            ldc);
        if (beta_bias)
          for (int64_t i = 0; i < s.M; ++i)
            for (int64_t j = 0; j < s.N; ++j) want[i * ldc + j] += bias[j];
        // float sums of K unit-variance products against double sums: 1e-5 of the largest value.
        // Comparing all of C (ldc wide) also checks that the columns past N keep their 9s.
        const std::string at = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) +
                               (ta ? " (A transposed)" : "") + (beta_bias ? " beta, bias" : "");
        EXPECT_TRUE(test::close_rel_max("head_gemm " + at, got.data(), want.data(), s.M * ldc, 1e-5));
      }
  }
}

// head_transpose against the plain transpose: block edges and partial blocks both ways.
TEST(Simd, HeadTransposeMatchesPlain) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{65, 16},
                            {197, 64},
                            {5, 3},
                            {16, 16},
                            {33, 80},
                            {1, 1},
                            {50, 4},
                            {4, 50},
                            {37, 3},
                            {50, 16},
                            {16, 50},
                            {34, 35},
                            {2, 19},
                            {16, 4},
                            {4, 16},
                            {3, 5},
                            {5, 5},
                            {50, 8},  // the narrow heads' probabilities (4 x 4 tiles on AVX2)
                            {8, 24},
                            {21, 29},  // AVX2: 8 x 8 tiles, 4 x 4 right of and below them, the plain loop
                            {20, 27}}) {
    const int64_t lds = cols + 3, ldd = rows + 5;
    auto src = test::randn(rows * lds, 3);
    std::vector<float> got(cols * ldd, 9.f), want(cols * ldd, 9.f);
    cpu::head_transpose(got.data(), ldd, src.data(), lds, rows, cols);
    cpu::transpose(want.data(), ldd, src.data(), lds, rows, cols);
    EXPECT_EQ(got, want) << rows << "x" << cols;
  }
}

namespace {
// head_scores' operands for an M x T x D head: q [M, D] (stride 3D + 1, as in qkv), k [T, D]
// (same stride) and k^T [D, ldk] (ldk: T rounded up to 16, NaN past T, which must not
// matter), P [M, T]; random from seed, seed + 1 and seed + 2. Key masks: km masks a whole
// vector (keys 16 to 31) and every fifth key from 2, none masks every key.
struct HeadShape {
  int64_t M, T, D;
};
struct ScoresInputs {
  int64_t ldq, ldk;
  std::vector<float> q, k, kT, P;
  std::vector<uint8_t> km, none;
};
ScoresInputs scores_inputs(HeadShape s, uint64_t seed) {
  const auto [M, T, D] = s;
  ScoresInputs in{
      3 * D + 1, (T + 15) / 16 * 16, {}, {}, {}, {}, std::vector<uint8_t>(T), std::vector<uint8_t>(T, 0)};
  in.q = test::randn(M * in.ldq, seed), in.k = test::randn(T * in.ldq, seed + 1);
  in.P = test::randn(M * T, seed + 2);
  in.kT.assign(D * in.ldk, std::nanf(""));
  cpu::transpose(in.kT.data(), in.ldk, in.k.data(), in.ldq, T, D);
  for (int64_t j = 0; j < T; ++j) in.km[j] = (j % 5 != 2) && !(j >= 16 && j < 32);
  return in;
}
}  // namespace

// head_scores, each mode, against gemm_reference plus the reference softmax (and its
// backward): T from 1 to past the 208 keys held in registers, key masks with whole
// vectors masked and every key masked, D from 4 to 80.
TEST(Simd, HeadScoresMatchReference) {
  for (HeadShape s : {HeadShape{65, 65, 16}, HeadShape{50, 50, 4}, HeadShape{197, 197, 64},
                      HeadShape{7, 3, 80}, HeadShape{1, 1, 1}, HeadShape{20, 230, 32}, HeadShape{9, 33, 8}}) {
    const int64_t T = s.T;
    const auto [ldq, ldk, q, k, kT, P, km, none] = scores_inputs(s, 4);
    for (const uint8_t* mask : std::vector<const uint8_t*>{nullptr, km.data(), none.data()}) {
      std::vector<float> S(s.M * T), got(s.M * T, 9.f), want(s.M * T);
      cpu::gemm_reference(false, true, s.M, T, s.D, 0.3f, q.data(), ldq, k.data(), ldq, 0.f, S.data(), T);
      const std::string at = std::to_string(s.M) + "x" + std::to_string(T) + "x" + std::to_string(s.D) +
                             (mask == km.data() ? " masked"
                              : mask            ? " all masked"
                                                : "");
      if (!mask) {
        cpu::head_scores(cpu::HeadScores::Store, s.M, T, s.D, 0.3f, q.data(), ldq, kT.data(), ldk, nullptr,
                         nullptr, got.data(), T);
        EXPECT_TRUE(test::close_rel_max("head_scores store " + at, got.data(), S.data(), s.M * T, 1e-5));
        // SoftmaxBackward: S plays dP; P is any row-stochastic-looking matrix.
        want = S;
        cpu::softmax_backward_rows_reference(want.data(), P.data(), s.M, T);
        cpu::head_scores(cpu::HeadScores::SoftmaxBackward, s.M, T, s.D, 0.3f, q.data(), ldq, kT.data(), ldk,
                         nullptr, P.data(), got.data(), T);
        EXPECT_TRUE(test::close_rel_max("head_scores softmax backward " + at, got.data(), want.data(),
                                        s.M * T, 1e-5));
      }
      want = S;
      cpu::softmax_rows_reference(want.data(), s.M, T, mask);
      cpu::head_scores(cpu::HeadScores::Softmax, s.M, T, s.D, 0.3f, q.data(), ldq, kT.data(), ldk, mask,
                       nullptr, got.data(), T);
      EXPECT_TRUE(test::close_rel_max("head_scores softmax " + at, got.data(), want.data(), s.M * T, 1e-5));
    }
  }
}

// head_scores gives the bits of the product and then the row kernels of the same path (the S
// of head_gemm, then softmax_rows or softmax_backward_rows): AVX-512, which applies the
// softmax (or its backward) while S is in registers up to 96 keys, gives what its unfused
// path would, and a fused kernel for another path (docs/design.md, Instruction sets) is held
// to the same. Row counts that leave partial row blocks, T across 96 keys, keys masked and
// all masked.
TEST(Simd, HeadScoresAreTheProductThenTheRowKernels) {
  for (HeadShape s : {HeadShape{65, 65, 16}, HeadShape{50, 50, 4}, HeadShape{13, 33, 8}, HeadShape{7, 3, 80},
                      HeadShape{5, 96, 24}, HeadShape{11, 97, 16}, HeadShape{3, 17, 1}}) {
    const int64_t T = s.T;
    const auto [ldq, ldk, q, k, kT, P, km, none] = scores_inputs(s, 7);
    const std::string at = std::to_string(s.M) + "x" + std::to_string(T) + "x" + std::to_string(s.D);
    for (const uint8_t* mask : std::vector<const uint8_t*>{nullptr, km.data(), none.data()}) {
      std::vector<float> got(s.M * T, 9.f), want(s.M * T);
      cpu::head_gemm(s.M, T, s.D, 0.3f, q.data(), ldq, 1, kT.data(), ldk, 0.f, nullptr, want.data(), T);
      cpu::softmax_rows(want.data(), s.M, T, mask);
      cpu::head_scores(cpu::HeadScores::Softmax, s.M, T, s.D, 0.3f, q.data(), ldq, kT.data(), ldk, mask,
                       nullptr, got.data(), T);
      EXPECT_TRUE(
          test::close_rel_max("head_scores softmax, bits " + at, got.data(), want.data(), s.M * T, 0.0));
    }
    std::vector<float> got(s.M * T, 9.f), want(s.M * T);
    cpu::head_gemm(s.M, T, s.D, 0.3f, q.data(), ldq, 1, kT.data(), ldk, 0.f, nullptr, want.data(), T);
    cpu::softmax_backward_rows(want.data(), P.data(), s.M, T);
    cpu::head_scores(cpu::HeadScores::SoftmaxBackward, s.M, T, s.D, 0.3f, q.data(), ldq, kT.data(), ldk,
                     nullptr, P.data(), got.data(), T);
    EXPECT_TRUE(test::close_rel_max("head_scores softmax backward, bits " + at, got.data(), want.data(),
                                    s.M * T, 0.0));
  }
}

// The forward splits heads into blocks of query rows when the (sample, head) pairs do not
// spread evenly over the threads: 3 heads are 3 items on 1 thread, 12 row blocks on 2, 6
// heads whole on both. The bits must not depend on it, nor on the key mask.
TEST(Simd, AttentionForwardIsTheSameOnAnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (int64_t H : {3, 6})
    for (bool masked : {false, true}) {
      const int64_t B = 1, T = 197, C = 64 * H;
      const auto qkv = test::randn(B * T * 3 * C, 41);
      std::vector<uint8_t> km(B * T, 1);
      for (int64_t i = 0; i < B * T; i += 5) km[i] = 0;
      std::vector<std::vector<float>> out(2, std::vector<float>(B * T * C)),
          probs(2, std::vector<float>(B * H * T * T));
      for (int t : {1, 2}) {
        omp_set_num_threads(t);
        cpu::attention_forward(out[t - 1].data(), probs[t - 1].data(), nullptr, qkv.data(),
                               masked ? km.data() : nullptr, B, T, C, H, 0.f, 0);
      }
      omp_set_num_threads(saved);
      EXPECT_TRUE(test::close_rel_max("attention out, 1 vs 2 threads, H=" + std::to_string(H), out[1].data(),
                                      out[0].data(), B * T * C, 0.0));
      EXPECT_TRUE(test::close_rel_max("attention probabilities, 1 vs 2 threads, H=" + std::to_string(H),
                                      probs[1].data(), probs[0].data(), B * H * T * T, 0.0));
    }
}

// The whole attention core, forward and backward, against plain loops in double at the
// shapes its kernels branch on: cifar-seed's (65 keys, D = 16: softmax in registers),
// 197 keys with D = 64 (key chunks, separate row softmax), MNIST's D = 4, with a key mask
// and attention dropout. The reference applies dropout with the same counter-based draws.
TEST(Simd, AttentionMatchesPlainLoops) {
  struct S {
    int64_t B, T, C, H;
    float drop;
  };
  // Narrow heads (D <= 8): without dropout the forward runs groups of 16 samples (AVX-512),
  // 8 (AVX2) or 4 (NEON) along the lanes (attention_lanes.cpp), a last group of fewer than
  // 12 (6, 4) per head (mnist-seed's shape at B = 19: 16 + 3, 8 + 8 + 3, or 4 x 4 + 3; B =
  // 30: 16 + a group of 14, 3 x 8 + a group of 6, or 7 x 4 + 2; B = 9: 8 + 1 on AVX2 and
  // NEON; D = 4 at batch 1, D = 8), with dropout per head in transposed products
  // (D = 4 and D = 1). Their backward without dropout runs in one pass per head
  // (attention_narrow.cpp: D = 4, 8, 3 and 5, up to 96 keys on AVX-512, 64 on AVX2 and NEON;
  // 97 (65) keys take the general path), with dropout in the general path.
  // B = 48 at D = 16: the batch's qkv (2.4 MB) is past L2, so each sample's rows are read in
  // order first (warm_rows), once per sample per thread.
  for (S s : {S{2, 65, 32, 2, 0.f}, S{1, 197, 128, 2, 0.f}, S{2, 50, 8, 2, 0.3f}, S{1, 100, 48, 3, 0.2f},
              S{1, 80, 8, 2, 0.f}, S{3, 33, 24, 3, 0.f}, S{1, 20, 3, 3, 0.1f}, S{19, 50, 8, 2, 0.f},
              S{30, 20, 8, 2, 0.f}, S{48, 65, 64, 4, 0.f}, S{2, 96, 6, 2, 0.f}, S{2, 17, 5, 1, 0.f},
              S{1, 97, 8, 2, 0.f}, S{2, 64, 6, 2, 0.f}, S{9, 8, 16, 2, 0.f}}) {
    const int64_t B = s.B, T = s.T, C = s.C, H = s.H, D = C / H, ld = 3 * C;
    const double scale = 1.0 / std::sqrt(double(D));
    const uint64_t key = 99;
    auto qkv = test::randn(B * T * ld, 31), dout = test::randn(B * T * C, 32);
    std::vector<uint8_t> km(B * T, 1);
    for (int64_t i = 0; i < B * T; ++i) km[i] = i % 7 != 3;
    std::vector<float> out(B * T * C), probs(B * H * T * T), pdrop(B * H * T * T), dqkv(B * T * ld);
    cpu::attention_forward(out.data(), probs.data(), s.drop > 0 ? pdrop.data() : nullptr, qkv.data(),
                           km.data(), B, T, C, H, s.drop, key);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(),
                            s.drop > 0 ? pdrop.data() : nullptr, B, T, C, H, s.drop, key);
    if (s.drop == 0) {  // inference keeps no probabilities: the same output, bit for bit
      std::vector<float> out2(B * T * C);
      cpu::attention_forward(out2.data(), nullptr, nullptr, qkv.data(), km.data(), B, T, C, H, 0.f, key);
      EXPECT_EQ(out2, out) << "attention without probabilities kept, B=" << B << " T=" << T;
    }
    std::vector<double> ro(B * T * C), rd(B * T * ld), P(T * T), Pd(T * T), dP(T * T);
    std::vector<float> want_p(B * H * T * T);  // the probabilities kept for the backward and maps
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        auto q = [&](int64_t t, int64_t d) { return double(qkv[(b * T + t) * ld + h * D + d]); };
        auto k = [&](int64_t t, int64_t d) { return double(qkv[(b * T + t) * ld + C + h * D + d]); };
        auto v = [&](int64_t t, int64_t d) { return double(qkv[(b * T + t) * ld + 2 * C + h * D + d]); };
        auto g = [&](int64_t t, int64_t d) { return double(dout[(b * T + t) * C + h * D + d]); };
        const int64_t first = (b * H + h) * T * T;
        for (int64_t i = 0; i < T; ++i) {
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < T; ++j) {
            double x = 0;
            for (int64_t d = 0; d < D; ++d) x += q(i, d) * k(j, d);
            P[i * T + j] = km[b * T + j] ? x * scale : -1e300;
            mx = std::max(mx, P[i * T + j]);
          }
          for (int64_t j = 0; j < T; ++j)
            sum += (P[i * T + j] = km[b * T + j] ? std::exp(P[i * T + j] - mx) : 0);
          for (int64_t j = 0; j < T; ++j) {
            P[i * T + j] /= sum;
            want_p[((b * H + h) * T + i) * T + j] = float(P[i * T + j]);
            const bool keep = s.drop == 0 || uniform_at(key, first + i * T + j) >= s.drop;
            Pd[i * T + j] = keep ? P[i * T + j] / (1 - s.drop) : 0;
          }
        }
        for (int64_t i = 0; i < T; ++i)
          for (int64_t d = 0; d < D; ++d) {
            double o = 0;
            for (int64_t j = 0; j < T; ++j) o += Pd[i * T + j] * v(j, d);
            ro[(b * T + i) * C + h * D + d] = o;
          }
        // Backward: dv = Pd^T dout; dP = dout v^T through the dropout; dS; dq, dk.
        for (int64_t j = 0; j < T; ++j)
          for (int64_t d = 0; d < D; ++d) {
            double x = 0;
            for (int64_t i = 0; i < T; ++i) x += Pd[i * T + j] * g(i, d);
            rd[(b * T + j) * ld + 2 * C + h * D + d] = x;
          }
        for (int64_t i = 0; i < T; ++i) {
          double dot = 0;
          for (int64_t j = 0; j < T; ++j) {
            double x = 0;
            for (int64_t d = 0; d < D; ++d) x += g(i, d) * v(j, d);
            const bool keep = s.drop == 0 || uniform_at(key, first + i * T + j) >= s.drop;
            dP[i * T + j] = keep ? x / (1 - s.drop) : 0;
            dot += P[i * T + j] * dP[i * T + j];
          }
          for (int64_t j = 0; j < T; ++j) dP[i * T + j] = P[i * T + j] * (dP[i * T + j] - dot);
        }
        for (int64_t i = 0; i < T; ++i)
          for (int64_t d = 0; d < D; ++d) {
            double dq = 0, dk = 0;
            for (int64_t j = 0; j < T; ++j) dq += dP[i * T + j] * k(j, d), dk += dP[j * T + i] * q(j, d);
            rd[(b * T + i) * ld + h * D + d] = scale * dq;
            rd[(b * T + i) * ld + C + h * D + d] = scale * dk;
          }
      }
    const std::vector<float> want_o(ro.begin(), ro.end()), want_d(rd.begin(), rd.end());
    const std::string at = "B=" + std::to_string(B) + " T=" + std::to_string(T) + " D=" + std::to_string(D) +
                           " drop=" + std::to_string(s.drop);
    // float sums of up to 197 terms against double: 1e-5 of the largest value.
    EXPECT_TRUE(test::close_rel_max("attention out " + at, out.data(), want_o.data(), B * T * C, 1e-5));
    EXPECT_TRUE(
        test::close_rel_max("attention probs " + at, probs.data(), want_p.data(), B * H * T * T, 1e-5));
    EXPECT_TRUE(test::close_rel_max("attention dqkv " + at, dqkv.data(), want_d.data(), B * T * ld, 1e-5));
  }
}

// A sample whose keys are all masked attends to nothing: zero probabilities and output, in
// the lanes kernel (D = 4, a group of 16) as in the per-head one (D = 16), next to samples
// that are not.
TEST(Simd, AttentionWithEveryKeyMaskedGivesZeros) {
  for (int64_t C : {8, 32}) {
    const int64_t B = 16, T = 5, H = 2;
    auto qkv = test::randn(B * T * 3 * C, 7);
    std::vector<uint8_t> km(B * T, 1);
    for (int64_t t = 0; t < T; ++t) km[t] = 0;  // sample 0
    std::vector<float> out(B * T * C, 9.f), probs(B * H * T * T, 9.f);
    cpu::attention_forward(out.data(), probs.data(), nullptr, qkv.data(), km.data(), B, T, C, H, 0.f, 0);
    for (int64_t i = 0; i < T * C; ++i) ASSERT_EQ(out[i], 0.f) << "C=" << C << " out " << i;
    for (int64_t i = 0; i < H * T * T; ++i) ASSERT_EQ(probs[i], 0.f) << "C=" << C << " probs " << i;
    for (int64_t i = T * C; i < B * T * C; ++i) ASSERT_TRUE(std::isfinite(out[i]) && out[i] != 9.f);
  }
}

}  // namespace vit

namespace vit {

// The bias gradient's column sums (AVX-512 row segments per thread): every width class (a
// masked tail, one register block of 8 vectors, several) against sums in double, added onto
// what db held.
// Column sums are split into column blocks per thread; the bits must not depend on how
// many: 1 and 2 threads, narrow (row phases) and wide widths, the bias gradient and
// LayerNorm's weight and bias gradients.
TEST(Simd, ColumnSumsAreTheSameOnAnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (int64_t N : {8, 24, 40, 64, 72, 96, 100, 200, 768}) {
    const int64_t M = 3001;  // enough work for 2 threads
    const auto dy = test::randn(M * N, 21), x = test::randn(M * N, 22), w = test::randn(N, 23);
    std::vector<float> mean(M), rstd(M), y(M * N);
    cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), M, N, 1e-6f);
    std::vector<std::vector<float>> db(2, std::vector<float>(N, 0.f)), lw(2, std::vector<float>(N, 0.f)),
        lb(2, std::vector<float>(N, 0.f)), dx(2, std::vector<float>(M * N)), dx_acc(2, dy),
        dxsum(2, std::vector<float>(N, 0.25f));
    // On one thread, rows wider than 64 floats take the one-pass backward (dx, the
    // parameter gradients and dx's column sums in one walk); on two, three passes.
    for (int t : {1, 2}) {
      omp_set_num_threads(t);
      cpu::colsum_add(db[t - 1].data(), dy.data(), M, N);
      cpu::layernorm_backward(dx[t - 1].data(), lw[t - 1].data(), lb[t - 1].data(), dy.data(), x.data(),
                              mean.data(), rstd.data(), w.data(), M, N, false);
      cpu::layernorm_backward(dx_acc[t - 1].data(), lw[t - 1].data(), lb[t - 1].data(), dy.data(), x.data(),
                              mean.data(), rstd.data(), w.data(), M, N, true, dxsum[t - 1].data());
    }
    omp_set_num_threads(saved);
    EXPECT_EQ(db[0], db[1]) << "bias gradient, N=" << N;
    EXPECT_EQ(lw[0], lw[1]) << "LayerNorm weight gradient, C=" << N;
    EXPECT_EQ(lb[0], lb[1]) << "LayerNorm bias gradient, C=" << N;
    EXPECT_EQ(dx[0], dx[1]) << "LayerNorm input gradient, C=" << N;
    EXPECT_EQ(dx_acc[0], dx_acc[1]) << "LayerNorm input gradient added to dy, C=" << N;
    EXPECT_EQ(dxsum[0], dxsum[1]) << "column sums of the LayerNorm input gradient, C=" << N;
    // And those sums are colsum_add's of the dx written, bit for bit.
    std::vector<float> want(N, 0.25f);
    cpu::colsum_add(want.data(), dx_acc[0].data(), M, N);
    EXPECT_EQ(dxsum[0], want) << "dx column sums against colsum_add, C=" << N;
  }
}

// Off AVX-512 (whose narrow sums go in row phases), colsum_add's sums are the plain loop's
// bits: each column's rows added in order from zero, then added to db. Stripes of 1 to 4
// vectors (AVX2) and every tail width, one row to many.
TEST(Simd, ColumnSumsAreThePlainLoopOffAvx512) {
  if (cpu::isa() == cpu::Isa::avx512) GTEST_SKIP() << "AVX-512 sums narrow matrices in row phases";
  for (int64_t M : {1, 2, 7, 301})
    for (int64_t N : {1, 3, 8, 13, 24, 31, 33, 57, 64, 100, 129, 389}) {
      const std::vector<float> dy = test::randn(M * N, uint64_t(3 * N + M)), db0 = test::randn(N, 4);
      std::vector<float> want = db0, got = db0;
      for (int64_t j = 0; j < N; ++j) {
        float acc = 0.f;
        for (int64_t i = 0; i < M; ++i) acc += dy[i * N + j];
        want[j] += acc;
      }
      cpu::colsum_add(got.data(), dy.data(), M, N);
      EXPECT_TRUE(test::close_rel_max("colsum_add, M = " + std::to_string(M) + ", N = " + std::to_string(N),
                                      got.data(), want.data(), N, 0.0));
    }
}

TEST(Simd, ColumnSumsMatchDouble) {
  // N <= 64 (1 to 4 vectors) sums rows in 4 phases; 301 rows leave a tail of 1.
  for (int64_t N : {5, 16, 40, 64, 130, 768}) {
    const int64_t M = 301;
    const auto dy = test::randn(M * N, 11);
    std::vector<float> db(N, 1.f), want(N);
    for (int64_t j = 0; j < N; ++j) {
      double s = 1.0;
      for (int64_t i = 0; i < M; ++i) s += dy[i * N + j];
      want[j] = float(s);
    }
    cpu::colsum_add(db.data(), dy.data(), M, N);
    EXPECT_TRUE(test::close_rel_max("colsum N=" + std::to_string(N), db.data(), want.data(), N, 1e-5));
  }
}

}  // namespace vit

namespace vit {

// The residual sum's vector run (a sample without LayerScale, on the paths that have one)
// gives the bits of the plain loop, which LayerScale with gamma = 1 takes (s (1 b) = s b):
// with drop path (kept samples scaled by 1 / (1 - p)) and dropout, over lengths with tails
// shorter than any vector.
TEST(Simd, ResidualRunIsThePlainLoop) {
  const int64_t B = 5, T = 7;
  for (int64_t C : {1, 8, 13, 192})
    for (const float path_p : {0.f, 0.3f}) {
      const int64_t n = B * T * C;
      const auto x = test::randn(n, 41), br = test::randn(n, 42);
      const std::vector<float> ones(size_t(C), 1.f);
      std::vector<float> run(n), plain(n), br1 = br, br2 = br;
      Tensor G(const_cast<float*>(ones.data()), {C});
      auto t3 = [&](std::vector<float>& v) { return Tensor(v.data(), {B, T, C}); };
      const Tensor X(const_cast<float*>(x.data()), {B, T, C});
      ops::residual_forward(t3(run), X, t3(br1), nullptr, 0.2f, 7, path_p, 8, 3);
      ops::residual_forward(t3(plain), X, t3(br2), &G, 0.2f, 7, path_p, 8, 3);
      int64_t diff = 0, first = -1;
      for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(&run[i], &plain[i], sizeof(float)) != 0 && diff++ == 0) first = i;
      EXPECT_EQ(diff, 0) << "C=" << C << " path_p=" << path_p << ": " << diff << " of " << n
                         << " differ, first at " << first << ": got " << (first < 0 ? 0.f : run[first])
                         << ", want " << (first < 0 ? 0.f : plain[first]);
    }
}

// The residual sum with its LayerNorm in one walk over the samples gives the bits of the two
// calls: with and without drop path, dropout and LayerScale, rows of 8 (the short-row
// kernel), 72 (a masked tail) and 192 floats, on one thread and on two; and the path's vector
// run of the sum gives the plain loop's bits.
TEST(Simd, ResidualLayerNormIsTheTwoCalls) {
  const int saved = omp_get_max_threads();
  const int64_t B = 7, T = 13;
  for (int64_t C : {8, 72, 192})
    for (int variant = 0; variant < 4; ++variant)
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        const bool gamma_on = variant == 3;
        const float drop_p = variant == 2 ? 0.2f : 0.f, path_p = variant >= 1 ? 0.3f : 0.f;
        const int64_t n = B * T * C;
        const auto x = test::randn(n, 31), br = test::randn(n, 32), w = test::randn(C, 33),
                   b = test::randn(C, 34), g = test::randn(C, 35);
        std::vector<float> out1(n), out2(n), br1 = br, br2 = br, y1(n), y2(n, -1.f), m1(B * T), m2(B * T),
                                             r1(B * T), r2(B * T);
        Tensor G(const_cast<float*>(g.data()), {C});
        const Tensor* gamma = gamma_on ? &G : nullptr;
        auto t3 = [&](std::vector<float>& v) { return Tensor(v.data(), {B, T, C}); };
        auto c1 = [&](const std::vector<float>& v) { return Tensor(const_cast<float*>(v.data()), {C}); };
        ops::residual_forward(t3(out1), Tensor(const_cast<float*>(x.data()), {B, T, C}), t3(br1), gamma,
                              drop_p, 7, path_p, 8, 3);
        ops::layernorm_forward(Tensor(y1.data(), {B * T, C}), Tensor(m1.data(), {B * T}),
                               Tensor(r1.data(), {B * T}), Tensor(out1.data(), {B * T, C}), c1(w), c1(b),
                               1e-6f);
        ops::residual_layernorm_forward(t3(out2), Tensor(const_cast<float*>(x.data()), {B, T, C}), t3(br2),
                                        gamma, drop_p, 7, path_p, 8, 3,
                                        {Tensor(y2.data(), {B * T, C}), Tensor(m2.data(), {B * T}),
                                         Tensor(r2.data(), {B * T}), c1(w), c1(b), 1e-6f});
        const std::string at = " C=" + std::to_string(C) + " variant " + std::to_string(variant) + ", " +
                               std::to_string(threads) + " thread(s)";
        EXPECT_EQ(out1, out2) << "residual sum" << at;
        EXPECT_EQ(br1, br2) << "dropped branch" << at;
        EXPECT_EQ(y1, y2) << "normed rows" << at;
        EXPECT_EQ(m1, m2) << "means" << at;
        EXPECT_EQ(r1, r2) << "reciprocal deviations" << at;
      }
  omp_set_num_threads(saved);
  // Without LayerScale a sample's sum is one vector run where the path has one; a LayerScale
  // of ones takes the plain loop, x + s (1 branch), the same product and sum: the same bits.
  for (int64_t C : {8, 72, 190})
    for (float path_p : {0.f, 0.3f}) {
      const int64_t n = B * T * C;
      const auto x = test::randn(n, 41), br = test::randn(n, 42);
      const std::vector<float> ones(C, 1.f);
      std::vector<float> vec(n), plain(n), br1 = br, br2 = br;
      const Tensor X(const_cast<float*>(x.data()), {B, T, C}), G(const_cast<float*>(ones.data()), {C});
      ops::residual_forward(Tensor(vec.data(), {B, T, C}), X, Tensor(br1.data(), {B, T, C}), nullptr, 0.f, 7,
                            path_p, 8, 3);
      ops::residual_forward(Tensor(plain.data(), {B, T, C}), X, Tensor(br2.data(), {B, T, C}), &G, 0.f, 7,
                            path_p, 8, 3);
      size_t bad = 0;
      while (bad < vec.size() && vec[bad] == plain[bad]) ++bad;
      EXPECT_EQ(bad, vec.size()) << "residual run (" << cpu::isa_name(cpu::isa()) << ") C=" << C
                                 << " path_p=" << path_p << ": first mismatch at " << bad << ": got "
                                 << (bad < vec.size() ? vec[bad] : 0.f) << ", plain loop "
                                 << (bad < vec.size() ? plain[bad] : 0.f);
    }
  // The norm's output must hold B*T*C elements and its statistics B*T.
  std::vector<float> v(2 * 3 * 4), s(5);
  const Tensor t(v.data(), {2, 3, 4}), c(v.data(), {4});
  EXPECT_THROW(ops::residual_layernorm_forward(
                   t, t, t, nullptr, 0.f, 0, 0.f, 0, 0,
                   {Tensor(v.data(), {5, 4}), Tensor(s.data(), {6}), Tensor(s.data(), {6}), c, c, 1e-6f}),
               Error);
  EXPECT_THROW(ops::residual_layernorm_forward(
                   t, t, t, nullptr, 0.f, 0, 0.f, 0, 0,
                   {Tensor(v.data(), {6, 4}), Tensor(s.data(), {5}), Tensor(s.data(), {6}), c, c, 1e-6f}),
               Error);
}

}  // namespace vit

namespace vit {

// Rounding to bf16 (mixed-precision training's inputs, bf16 inference): the AVX-512 and AVX2
// lanes give the reference's bits on every kind of value: ties (to even), values that round up
// to infinity, subnormals (kept, not flushed), signed zeros, infinities and NaNs (quiet,
// payload kept), over lengths with every tail and on two threads.
TEST(Simd, RoundToBf16GivesTheReferenceBits) {
  const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu,
                              0xff7fffffu, 0x00000001u, 0x00008000u, 0x0000ffffu, 0x807fffffu, 0x7f800000u,
                              0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0x3f7fff80u};
  std::vector<float> x(4133);
  const auto r = test::randn(int64_t(x.size()), 21, 100.f);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u;
    if (i % 3 == 0) {
      u = special[(i / 3) % (sizeof(special) / sizeof(special[0]))];
    } else {
      std::memcpy(&u, &r[i], 4);
      if (i % 3 == 1) u = (u & 0xffff0000u) | 0x8000u | uint32_t(i & 0x1) << 16;  // exact ties
    }
    std::memcpy(&x[i], &u, 4);
  }
  for (const int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(9), int64_t(15), int64_t(16),
                          int64_t(17), int64_t(23), int64_t(40), int64_t(x.size())}) {
    std::vector<uint16_t> got(size_t(n) + 1, 0xabcd), want(size_t(n) + 1, 0xabcd);
    cpu::round_to_bf16(got.data(), x.data(), n);
    cpu::round_to_bf16_reference(want.data(), x.data(), n);
    EXPECT_EQ(got, want) << "n=" << n;  // the element past n is untouched too
  }
}

}  // namespace vit
