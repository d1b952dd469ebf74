// The oneDNN-backed gemm and its small-size loop against the double-accumulating reference.
#include "backends/cpu/cpu.h"
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
  // float accumulation over K terms of unit-variance products: relative error ~1e-6.
  EXPECT_TRUE(test::close_rel_max("gemm", got.data(), want.data(), c.M * c.N, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Gemm,
                         ::testing::Values(GemmCase{3, 5, 4, false, false}, GemmCase{7, 3, 5, true, false},
                                           GemmCase{4, 6, 3, false, true}, GemmCase{5, 4, 6, true, true},
                                           GemmCase{130, 70, 90, false, false},
                                           GemmCase{130, 70, 90, true, false},
                                           GemmCase{130, 70, 90, false, true},
                                           GemmCase{130, 70, 90, true, true}));

}  // namespace vit
