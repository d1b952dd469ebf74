// Finite-difference checks of every op's backward. Each test builds a scalar loss
// L = sum(y * R) with a fixed random R, so dL/dy = R, runs the op's backward with dy = R,
// and compares the analytic gradients with central differences of L.
// Tolerances: h = 1e-2 and 5e-3 x the largest gradient magnitude. In float32, rounding
// in L contributes ~1e-7 |L| / h ~ 1e-4 of that scale and the O(h^2) truncation error of
// the smooth ops about as much, so 5e-3 has margin while a wrong term (typically O(1)
// of the scale) fails clearly.
#include "core/check.h"
#include "ops/ops.h"
#include "support/check.h"

namespace vit {

namespace {
constexpr double kH = 1e-2, kTol = 5e-3;

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}
}  // namespace

TEST(GradCheck, Linear) {
  const int64_t M = 6, K = 5, N = 4;
  auto x = test::randn(M * K, 1), w = test::randn(N * K, 2), b = test::randn(N, 3), R = test::randn(M * N, 4);
  std::vector<float> y(M * N), dx(M * K), dw(N * K, 0.f), db(N, 0.f);
  Tensor X(x.data(), {M, K}), W(w.data(), {N, K}), Bt(b.data(), {N}), Y(y.data(), {M, N});
  auto loss = [&] {
    ops::linear_forward(Y, X, {W, Bt});
    return dot(y.data(), R.data(), M * N);
  };
  Tensor DX(dx.data(), {M, K}), DW(dw.data(), {N, K}), DB(db.data(), {N});
  ops::linear_backward(&DX, &DW, &DB, Tensor(R.data(), {M, N}), X, {W, Bt});
  EXPECT_TRUE(test::gradcheck("linear dx", x.data(), dx.data(), M * K, loss, kH, kTol));
  EXPECT_TRUE(test::gradcheck("linear dw", w.data(), dw.data(), N * K, loss, kH, kTol));
  EXPECT_TRUE(test::gradcheck("linear db", b.data(), db.data(), N, loss, kH, kTol));
}

TEST(GradCheck, LinearAccumulatesParamGradsAndOptionallyInputGrads) {
  const int64_t M = 3, K = 4, N = 2;
  auto x = test::randn(M * K, 1), w = test::randn(N * K, 2), R = test::randn(M * N, 4);
  std::vector<float> dx(M * K, 1.f), dw(N * K, 1.f), dx2(M * K, 0.f), dw2(N * K, 0.f);
  Tensor X(x.data(), {M, K}), W(w.data(), {N, K}), DY(R.data(), {M, N});
  Tensor DX(dx.data(), {M, K}), DW(dw.data(), {N, K}), DX2(dx2.data(), {M, K}), DW2(dw2.data(), {N, K});
  ops::linear_backward(&DX, &DW, nullptr, DY, X, {W}, nullptr, /*accumulate_dx=*/true);
  ops::linear_backward(&DX2, &DW2, nullptr, DY, X, {W}, nullptr, false);
  for (int64_t i = 0; i < M * K; ++i) EXPECT_FLOAT_EQ(dx[i], 1.f + dx2[i]) << i;
  for (int64_t i = 0; i < N * K; ++i) EXPECT_FLOAT_EQ(dw[i], 1.f + dw2[i]) << i;
}

// linear_forward's GELU epilogue: on plain fp32 weights the product then GELU in place (the
// same bits as the two ops), on packed weights GELU in the kernel (another summation order:
// 1e-5), and packing then unpacking through prepare_linear restores w exactly.
TEST(Ops, LinearGeluEpilogueOnPlainAndPackedWeights) {
  const int64_t M = 5, K = 24, N = 70;  // N: a full 64-row panel and a partial one
  auto x = test::randn(M * K, 1), w = test::randn(N * K, 2), b = test::randn(N, 3);
  const std::vector<float> w0 = w;
  std::vector<float> want(M * N), got(M * N), packed(M * N);
  const Tensor X(x.data(), {M, K}), Y(want.data(), {M, N});
  ops::LinearWeights lw(Tensor(w.data(), {N, K}), Tensor(b.data(), {N}));
  ops::linear_forward(Y, X, lw);
  ops::gelu_forward(Y, Y);
  ops::linear_forward(Tensor(got.data(), {M, N}), X, lw, ops::Epilogue::gelu);
  EXPECT_EQ(got, want);
  ops::prepare_linear(lw, Precision::fp32, /*packed=*/true);
  ops::linear_forward(Tensor(packed.data(), {M, N}), X, lw, ops::Epilogue::gelu);
  EXPECT_TRUE(test::close_rel_max("packed linear + gelu", packed.data(), want.data(), M * N, 1e-5));
  ops::prepare_linear(lw, Precision::fp32, /*packed=*/false);
  EXPECT_EQ(w, w0) << "unpacking restores the weights exactly";
}

TEST(GradCheck, LayerNorm) {
  const int64_t M = 5, C = 7;
  auto x = test::randn(M * C, 1), w = test::randn(C, 2), b = test::randn(C, 3), R = test::randn(M * C, 4);
  std::vector<float> y(M * C), mean(M), rstd(M), dx(M * C), dw(C, 0.f), db(C, 0.f);
  Tensor X(x.data(), {M, C}), Wt(w.data(), {C}), Bt(b.data(), {C}), Y(y.data(), {M, C});
  Tensor Mn(mean.data(), {M}), Rs(rstd.data(), {M});
  auto loss = [&] {
    ops::layernorm_forward(Y, Mn, Rs, X, Wt, Bt, 1e-6f);
    return dot(y.data(), R.data(), M * C);
  };
  loss();
  ops::layernorm_backward(Tensor(dx.data(), {M, C}), Tensor(dw.data(), {C}), Tensor(db.data(), {C}),
                          Tensor(R.data(), {M, C}), X, Mn, Rs, Wt, false);
  EXPECT_TRUE(test::gradcheck("layernorm dx", x.data(), dx.data(), M * C, loss, kH, kTol));
  EXPECT_TRUE(test::gradcheck("layernorm dw", w.data(), dw.data(), C, loss, kH, kTol));
  EXPECT_TRUE(test::gradcheck("layernorm db", b.data(), db.data(), C, loss, kH, kTol));
}

TEST(GradCheck, Gelu) {
  const int64_t n = 40;
  auto x = test::randn(n, 1, 2.f), R = test::randn(n, 2);
  std::vector<float> y(n), dx(n);
  auto loss = [&] {
    ops::gelu_forward(Tensor(y.data(), {n}), Tensor(x.data(), {n}));
    return dot(y.data(), R.data(), n);
  };
  ops::gelu_backward(Tensor(dx.data(), {n}), Tensor(R.data(), {n}), Tensor(x.data(), {n}));
  EXPECT_TRUE(test::gradcheck("gelu dx", x.data(), dx.data(), n, loss, kH, kTol));
}

// Attention with a key mask and, separately, with attention dropout under a fixed key.
class AttentionGrad : public ::testing::TestWithParam<float> {};

TEST_P(AttentionGrad, MatchesFiniteDifferences) {
  const float drop = GetParam();
  const int64_t B = 2, T = 5, C = 6, H = 2;
  auto qkv = test::randn(B * T * 3 * C, 1), R = test::randn(B * T * C, 2);
  std::vector<uint8_t> mask = {1, 1, 0, 1, 1, 1, 0, 1, 1, 0};  // [B,T]
  std::vector<float> out(B * T * C), probs(B * H * T * T), pdrop(B * H * T * T), dqkv(B * T * 3 * C);
  Tensor QKV(qkv.data(), {B, T, 3 * C}), O(out.data(), {B, T, C}), P(probs.data(), {B, H, T, T}),
      PD(pdrop.data(), {B, H, T, T});
  const uint64_t key = 1234;
  auto loss = [&] {
    ops::attention_forward(O, P, &PD, QKV, mask.data(), drop, key);
    return dot(out.data(), R.data(), B * T * C);
  };
  loss();
  ops::attention_backward(Tensor(dqkv.data(), {B, T, 3 * C}), Tensor(R.data(), {B, T, C}), QKV, P, &PD, drop,
                          key);
  EXPECT_TRUE(test::gradcheck("attention dqkv", qkv.data(), dqkv.data(), B * T * 3 * C, loss, kH, kTol, 200));
  // Masked keys receive no attention from any query.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          if (!mask[b * T + j]) {
            EXPECT_EQ(probs[((b * H + h) * T + i) * T + j], 0.f);
          }
        }
}

INSTANTIATE_TEST_SUITE_P(Dropout, AttentionGrad, ::testing::Values(0.f, 0.3f));

// The class token's row alone (attention_cls_*): finite differences, and the full op's row 0
// forward (out, probs, dropped probs: the same draws) and backward (the full backward with a
// zero gradient on every other query row), with a key mask, with and without dropout.
TEST_P(AttentionGrad, ClassTokenRowMatchesFiniteDifferencesAndTheFullOp) {
  const float drop = GetParam();
  const int64_t B = 2, T = 5, C = 6, H = 2;
  auto qkv = test::randn(B * T * 3 * C, 1), R = test::randn(B * C, 2);
  std::vector<uint8_t> mask = {1, 1, 0, 1, 1, 1, 0, 1, 1, 0};  // [B,T]
  std::vector<float> out(B * C), probs(B * H * T), pdrop(B * H * T), dqkv(B * T * 3 * C, 7.f);
  Tensor QKV(qkv.data(), {B, T, 3 * C}), O(out.data(), {B, 1, C}), P(probs.data(), {B, H, 1, T}),
      PD(pdrop.data(), {B, H, 1, T});
  const uint64_t key = 1234;
  const int64_t first = 3;  // a shard's first sample: the draws follow it
  auto loss = [&] {
    ops::attention_cls_forward(O, P, &PD, QKV, mask.data(), drop, key, first);
    return dot(out.data(), R.data(), B * C);
  };
  loss();
  ops::attention_cls_backward(Tensor(dqkv.data(), {B, T, 3 * C}), Tensor(R.data(), {B, 1, C}), QKV, P, &PD,
                              drop, key, first);
  EXPECT_TRUE(test::gradcheck("attention (class token) dqkv", qkv.data(), dqkv.data(), B * T * 3 * C, loss,
                              kH, kTol, 200));

  std::vector<float> fout(B * T * C), fprobs(B * H * T * T), fpdrop(B * H * T * T), fdqkv(B * T * 3 * C);
  std::vector<float> fR(B * T * C, 0.f);  // R on the class token's rows, zeros elsewhere
  for (int64_t b = 0; b < B; ++b)
    std::copy(R.begin() + b * C, R.begin() + (b + 1) * C, fR.begin() + b * T * C);
  Tensor FP(fprobs.data(), {B, H, T, T}), FPD(fpdrop.data(), {B, H, T, T});
  ops::attention_forward(Tensor(fout.data(), {B, T, C}), FP, &FPD, QKV, mask.data(), drop, key, first);
  ops::attention_backward(Tensor(fdqkv.data(), {B, T, 3 * C}), Tensor(fR.data(), {B, T, C}), QKV, FP, &FPD,
                          drop, key, first);
  std::vector<float> row_out(B * C), row_probs(B * H * T), row_pdrop(B * H * T);
  for (int64_t b = 0; b < B; ++b) {
    std::copy_n(fout.begin() + b * T * C, C, row_out.begin() + b * C);
    for (int64_t h = 0; h < H; ++h) {
      std::copy_n(fprobs.begin() + (b * H + h) * T * T, T, row_probs.begin() + (b * H + h) * T);
      std::copy_n(fpdrop.begin() + (b * H + h) * T * T, T, row_pdrop.begin() + (b * H + h) * T);
    }
  }
  EXPECT_TRUE(test::close_rel_max("class-token out vs full row 0", out.data(), row_out.data(), B * C, 1e-5));
  EXPECT_TRUE(test::close_rel_max("class-token probs vs full row 0", probs.data(), row_probs.data(),
                                  B * H * T, 1e-5));
  EXPECT_TRUE(test::close_rel_max("class-token dropped probs vs full row 0", pdrop.data(), row_pdrop.data(),
                                  B * H * T, 1e-5));
  EXPECT_TRUE(test::close_rel_max("class-token dqkv vs full backward", dqkv.data(), fdqkv.data(),
                                  B * T * 3 * C, 1e-5));
}

class ResidualGrad : public ::testing::TestWithParam<bool> {};

TEST_P(ResidualGrad, DropoutDropPathAndLayerScale) {
  const bool layer_scale = GetParam();
  const int64_t B = 4, T = 3, C = 2, n = B * T * C;
  auto x = test::randn(n, 1), br = test::randn(n, 2), Rw = test::randn(n, 3), gamma = test::randn(C, 4);
  std::vector<float> out(n), tmp(n), dbr(n), dgamma(C, 0.f);
  Tensor G(gamma.data(), {C}), DG(dgamma.data(), {C}), TMP(tmp.data(), {B, T, C});
  const Tensor* g = layer_scale ? &G : nullptr;
  auto loss = [&] {
    tmp = br;  // the op drops the branch in place
    ops::residual_forward(Tensor(out.data(), {B, T, C}), Tensor(x.data(), {B, T, C}), TMP, g, 0.25f, 11, 0.4f,
                          22);
    return dot(out.data(), Rw.data(), n);
  };
  loss();  // leaves the dropped branch in tmp, as the forward does for backward
  ops::residual_backward(Tensor(dbr.data(), {B, T, C}), layer_scale ? &DG : nullptr,
                         Tensor(Rw.data(), {B, T, C}), &TMP, g, 0.25f, 11, 0.4f, 22);
  // A flattened view would apply drop path per row instead of per sample: refused.
  EXPECT_THROW(ops::residual_backward(Tensor(dbr.data(), {B * T * C}), nullptr,
                                      Tensor(Rw.data(), {B * T * C}), nullptr, nullptr, 0.f, 0, 0.4f, 22),
               Error);
  EXPECT_TRUE(test::gradcheck("residual dbranch", br.data(), dbr.data(), n, loss, kH, kTol));
  if (layer_scale) {
    EXPECT_TRUE(test::gradcheck("residual dgamma", gamma.data(), dgamma.data(), C, loss, kH, kTol));
  }
  // Some elements and some samples must actually be dropped for this test to mean anything.
  int zeros = 0;
  for (float v : dbr) zeros += v == 0.f;
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, n);
}

INSTANTIATE_TEST_SUITE_P(LayerScale, ResidualGrad, ::testing::Values(false, true));

TEST(GradCheck, DropoutKeepsExpectationAndRegeneratesMask) {
  const int64_t n = 200000;
  std::vector<float> x(n, 1.f), g(n, 1.f);
  ops::dropout_forward(Tensor(x.data(), {n}), 0.3f, 99);
  ops::dropout_backward(Tensor(g.data(), {n}), 0.3f, 99);
  double mean = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    mean += x[i];
    kept += x[i] != 0.f;
    ASSERT_EQ(x[i], g[i]) << "backward mask differs from forward at " << i;
  }
  // Binomial(n, 0.7): std of the kept fraction is sqrt(0.21/n) ~ 1e-3; allow 5 sigma.
  EXPECT_NEAR(double(kept) / n, 0.7, 5e-3);
  EXPECT_NEAR(mean / n, 1.0, 5e-3 / 0.7);
}

struct TokensCase {
  bool has_cls;
  int64_t R;
  bool pos_all;
};

class TokensGrad : public ::testing::TestWithParam<TokensCase> {};

TEST_P(TokensGrad, PrefixTokensAndPos) {
  const auto [has_cls, R, pos_all] = GetParam();
  const int64_t B = 2, N = 3, C = 4, T = N + R + (has_cls ? 1 : 0), Tp = pos_all ? T : N;
  auto pe = test::randn(B * N * C, 1), cls = test::randn(C, 2),
       reg = test::randn(std::max<int64_t>(R, 1) * C, 5), pos = test::randn(Tp * C, 3),
       Rw = test::randn(B * T * C, 4);
  std::vector<float> tok(B * T * C), dpe(B * N * C), dcls(C, 0.f), dreg(reg.size(), 0.f), dpos(Tp * C, 0.f);
  Tensor PE(pe.data(), {B * N, C}), CLS(cls.data(), {1, 1, C}), REG(reg.data(), {1, R, C}),
      POS(pos.data(), {1, Tp, C});
  auto loss = [&] {
    ops::tokens_forward(Tensor(tok.data(), {B, T, C}), PE, has_cls ? &CLS : nullptr, R ? &REG : nullptr, POS);
    return dot(tok.data(), Rw.data(), B * T * C);
  };
  Tensor DCLS(dcls.data(), {1, 1, C}), DREG(dreg.data(), {1, R, C}), DPOS(dpos.data(), {1, Tp, C});
  ops::tokens_backward(Tensor(dpe.data(), {B * N, C}), has_cls ? &DCLS : nullptr, R ? &DREG : nullptr, &DPOS,
                       Tensor(Rw.data(), {B, T, C}), has_cls, R, pos_all);
  EXPECT_TRUE(test::gradcheck("tokens dpe", pe.data(), dpe.data(), B * N * C, loss, kH, kTol));
  if (has_cls) {
    EXPECT_TRUE(test::gradcheck("tokens dcls", cls.data(), dcls.data(), C, loss, kH, kTol));
  }
  if (R) {
    EXPECT_TRUE(test::gradcheck("tokens dreg", reg.data(), dreg.data(), R * C, loss, kH, kTol));
  }
  EXPECT_TRUE(test::gradcheck("tokens dpos", pos.data(), dpos.data(), Tp * C, loss, kH, kTol));
  // Order: [cls, reg..., patches]; without pos on the prefix, the class token is copied as is.
  loss();
  if (has_cls && !pos_all) {
    EXPECT_EQ(tok[0], cls[0]);
  }
  if (R && !pos_all) {
    EXPECT_EQ(tok[(has_cls ? 1 : 0) * C], reg[0]);
  }
  EXPECT_EQ(tok[(T - N) * C], pe[0] + pos[(pos_all ? T - N : 0) * C]);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TokensGrad,
                         ::testing::Values(TokensCase{true, 0, true}, TokensCase{false, 0, true},
                                           TokensCase{true, 2, false}, TokensCase{true, 2, true},
                                           TokensCase{false, 1, false}));

class PoolGrad : public ::testing::TestWithParam<bool> {};

TEST_P(PoolGrad, MatchesFiniteDifferences) {
  const bool avg = GetParam();
  const int64_t B = 2, T = 5, C = 3, first = 1;
  std::vector<uint8_t> mask = {1, 0, 1, 1, 0, 0, 1, 1};  // [B, T-first]
  auto x = test::randn(B * T * C, 1), R = test::randn(B * C, 2);
  std::vector<float> pooled(B * C), dx(B * T * C);
  auto loss = [&] {
    ops::pool_forward(Tensor(pooled.data(), {B, C}), Tensor(x.data(), {B, T, C}), mask.data(), avg, first);
    return dot(pooled.data(), R.data(), B * C);
  };
  ops::pool_backward(Tensor(dx.data(), {B, T, C}), Tensor(R.data(), {B, C}), mask.data(), avg, first);
  EXPECT_TRUE(
      test::gradcheck(avg ? "avg pool dx" : "token pool dx", x.data(), dx.data(), B * T * C, loss, kH, kTol));
}

INSTANTIATE_TEST_SUITE_P(Modes, PoolGrad, ::testing::Values(false, true));

// Token pooling of the first two tokens (DeiT's class and distillation tokens), token-major.
TEST(GradCheck, TokenPoolOfTwoTokens) {
  const int64_t B = 3, T = 4, C = 2, K = 2;
  auto x = test::randn(B * T * C, 3), R = test::randn(K * B * C, 4);
  std::vector<float> pooled(K * B * C), dx(B * T * C);
  ops::pool_forward(Tensor(pooled.data(), {K * B, C}), Tensor(x.data(), {B, T, C}), nullptr, false, 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) ASSERT_EQ(pooled[(k * B + b) * C + c], x[(b * T + k) * C + c]);
  auto loss = [&] {
    ops::pool_forward(Tensor(pooled.data(), {K * B, C}), Tensor(x.data(), {B, T, C}), nullptr, false, 0);
    return dot(pooled.data(), R.data(), K * B * C);
  };
  ops::pool_backward(Tensor(dx.data(), {B, T, C}), Tensor(R.data(), {K * B, C}), nullptr, false, 0);
  EXPECT_TRUE(test::gradcheck("two-token pool dx", x.data(), dx.data(), B * T * C, loss, kH, kTol));
}

TEST(GradCheck, CrossEntropyWithSmoothingAndSoftTargets) {
  const int64_t B = 3, K = 5;
  auto z = test::randn(B * K, 1, 2.f);
  std::vector<int64_t> labels = {0, 4, 2};
  std::vector<float> t = {0.2f, 0.3f, 0.5f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 1.f, 0.1f, 0.1f, 0.6f, 0.1f, 0.1f};
  std::vector<float> probs(B * K), dz(B * K);
  Tensor Z(z.data(), {B, K}), P(probs.data(), {B, K}), TG(t.data(), {B, K});
  for (bool soft : {false, true}) {
    auto loss = [&] {
      return ops::cross_entropy_forward(P, Z, soft ? nullptr : labels.data(), soft ? &TG : nullptr, 0.1f);
    };
    loss();
    ops::cross_entropy_backward(Tensor(dz.data(), {B, K}), P, soft ? nullptr : labels.data(),
                                soft ? &TG : nullptr, 0.1f);
    EXPECT_TRUE(test::gradcheck(soft ? "soft-target CE dz" : "smoothed CE dz", z.data(), dz.data(), B * K,
                                loss, kH, kTol));
  }
  // Value check: uniform logits give log K whatever the targets.
  std::vector<float> zero(B * K, 0.f);
  EXPECT_NEAR(ops::cross_entropy_forward(P, Tensor(zero.data(), {B, K}), labels.data(), nullptr, 0.1f),
              std::log(5.0), 1e-6);
}

TEST(GradCheck, BinaryCrossEntropyWithEveryOption) {
  const int64_t B = 3, K = 4;
  auto z = test::randn(B * K, 5, 2.f);
  std::vector<int64_t> labels = {1, 3, 0};
  std::vector<float> t = {0.7f, 0.3f, 0.f, 0.f, 0.f, 0.1f, 0.f, 0.9f, 0.5f, 0.f, 0.25f, 0.25f};
  std::vector<float> probs(B * K), dz(B * K);
  Tensor Z(z.data(), {B, K}), P(probs.data(), {B, K}), TG(t.data(), {B, K});
  BceOptions o;
  o.pos_weight = 2.f;
  for (bool soft : {false, true})
    for (bool sum : {false, true}) {
      o.sum_classes = sum;
      const int64_t* lp = soft ? nullptr : labels.data();
      const Tensor* tp = soft ? &TG : nullptr;
      auto loss = [&] { return ops::bce_forward(P, Z, lp, tp, 0.1f, o); };
      loss();
      ops::bce_backward(Tensor(dz.data(), {B, K}), P, lp, tp, 0.1f, o);
      EXPECT_TRUE(
          test::gradcheck(std::string(soft ? "soft" : "smoothed") + (sum ? " summed" : "") + " BCE dz",
                          z.data(), dz.data(), B * K, loss, kH, kTol));
    }
  // Value check: zero logits give log 2 per class whatever the targets (pos_weight 1).
  std::vector<float> zero(B * K, 0.f);
  EXPECT_NEAR(ops::bce_forward(P, Tensor(zero.data(), {B, K}), labels.data(), nullptr, 0.1f, {}),
              std::log(2.0), 1e-7);
}

TEST(Ops, ErrorsNameTheProblem) {
  std::vector<float> a(12), b(12), c(12);
  try {
    ops::linear_forward(Tensor(a.data(), {3, 4}), Tensor(b.data(), {3, 4}), {Tensor(c.data(), {3, 3})});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear weight"), std::string::npos) << e.what();
  }
  std::vector<int64_t> labels = {0, 7, 1};
  std::vector<float> p(12);
  try {
    ops::cross_entropy_forward(Tensor(p.data(), {3, 4}), Tensor(a.data(), {3, 4}), labels.data(), nullptr,
                               0.f);
    FAIL() << "expected a label error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 7"), std::string::npos) << e.what();
  }
}

}  // namespace vit
