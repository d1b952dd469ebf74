// The AVX-512 element-wise kernels against their plain reference versions (simd.h): GELU
// forward and backward, attention's softmax and its backward, LayerNorm forward and
// backward. Sizes include tails that are not a multiple of 16 lanes and masked keys.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/simd.h"
#include "support/check.h"

namespace vit {

namespace {
void require_avx512() {
  if (!cpu::simd::avx512()) GTEST_SKIP() << "no AVX-512 on this CPU (or VIT_SIMD=off): nothing to compare";
}

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

TEST(Simd, GeluMatchesReference) {
  require_avx512();
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

TEST(Simd, SoftmaxRowsMatchReference) {
  require_avx512();
  for (int64_t n : {5, 16, 50, 65, 197}) {
    const int64_t rows = 7;
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
    }
  }
  std::vector<float> all_masked(20, 1.f);
  std::vector<uint8_t> none(20, 0);
  cpu::softmax_rows(all_masked.data(), 1, 20, none.data());
  for (float p : all_masked) EXPECT_EQ(p, 0.f) << "a row with every key masked is all zeros";
}

TEST(Simd, LayerNormMatchesReference) {
  require_avx512();
  for (int64_t C : {8, 192, 200}) {
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
  }
}

}  // namespace vit

namespace vit {

// Attention's per-head products for small head dims: every shape class the register blocks
// have (rows in 4s and a remainder, one or two vectors of columns with a masked tail), with
// leading dimensions wider than the matrices as qkv's 3C rows are.
TEST(Simd, HeadGemmMatchesReference) {
  require_avx512();
  struct S {
    int64_t M, N, K;
  };
  for (S s : {S{50, 50, 4}, S{50, 4, 50}, S{65, 65, 16}, S{197, 64, 197}, S{7, 130, 3}, S{1, 1, 1}}) {
    const int64_t lda = s.K + 5, ldb = s.N + 3, ldc = s.N + 7;
    auto A = test::randn(s.M * lda, 1), B = test::randn(s.K * ldb, 2);
    std::vector<float> got(s.M * ldc, 9.f), want(s.M * ldc, 9.f);
    cpu::head_gemm_nn(s.M, s.N, s.K, 0.25f, A.data(), lda, B.data(), ldb, got.data(), ldc);
    cpu::gemm_reference(false, false, s.M, s.N, s.K, 0.25f, A.data(), lda, B.data(), ldb, 0.f, want.data(),
                        ldc);
    // float sums of K unit-variance products against double sums: 1e-5 of the largest value.
    // Comparing all of C (ldc wide) also checks that the columns past N keep their 9s.
    const std::string at = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
    EXPECT_TRUE(test::close_rel_max("head_gemm " + at, got.data(), want.data(), s.M * ldc, 1e-5));
  }
}

}  // namespace vit
