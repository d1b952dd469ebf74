// The kernel table's attention entries (backends/cpu/kernel_set.h) of every path this CPU runs
// against the generic table or plain loops written here: the row softmax and its backward,
// exp, head_scores with the softmax in registers, the narrow heads' one-pass backward and the
// forward with samples along the lanes. Other summation orders and exp approximations:
// within the stated tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "ops/kernel_paths.h"
#include "support/check.h"

namespace vit::cpu {

namespace {
// Keys 0, 3, 6, ... masked (0); the others kept.
std::vector<uint8_t> every_third_masked(int64_t n) {
  std::vector<uint8_t> km(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) km[size_t(j)] = j % 3 != 0;
  return km;
}

// One head's attention in plain loops: P = softmax(scale q k^T) (km: keys kept), out = P v;
// q, k, v, out rows ld floats apart.
void head_forward(float* out, float* P, const float* q, const float* k, const float* v, int64_t ld,
                  const uint8_t* km, int64_t T, int64_t D, float scale) {
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      float s = 0.f;
      for (int64_t d = 0; d < D; ++d) s += q[i * ld + d] * k[j * ld + d];
      P[i * T + j] = scale * s;
    }
  softmax_rows_reference(P, T, T, km);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t d = 0; d < D; ++d) {
      float s = 0.f;
      for (int64_t j = 0; j < T; ++j) s += P[i * T + j] * v[j * ld + d];
      out[i * ld + d] = s;
    }
}
}  // namespace

TEST(KernelTable, SoftmaxAndExpOfEveryPathAreTheGenericWithinFloatRounding) {
  const CpuKernels g = kernels_for(Isa::generic);
  for (const auto& [name, k] : vector_paths())
    for (int64_t n : {1, 7, 16, 50, 65, 197}) {
      const int64_t rows = 5;
      const auto S = test::randn(rows * n, 50, 3.f), dP = test::randn(rows * n, 51);
      const auto km = every_third_masked(n);
      for (const uint8_t* mask : {static_cast<const uint8_t*>(nullptr), km.data()}) {
        std::vector<float> P = S, Pw = S;
        k.softmax_rows(P.data(), rows, n, mask);
        g.softmax_rows(Pw.data(), rows, n, mask);
        EXPECT_TRUE(
            test::close_rel_max(name + " softmax_rows n " + std::to_string(n) + (mask ? " masked" : ""),
                                P.data(), Pw.data(), rows * n, 1e-5));
      }
      std::vector<float> P = S;
      g.softmax_rows(P.data(), rows, n, nullptr);
      std::vector<float> d = dP, dw = dP;
      k.softmax_backward_rows(d.data(), P.data(), rows, n);
      g.softmax_backward_rows(dw.data(), P.data(), rows, n);
      EXPECT_TRUE(test::close_rel_max(name + " softmax_backward_rows n " + std::to_string(n), d.data(),
                                      dw.data(), rows * n, 1e-5));
      std::vector<float> x = S;
      for (auto& v : x) v = -std::fabs(v) * 10.f;  // down to about -100: the underflow's edge too
      std::vector<float> e(x.size()), ew(x.size());
      k.exp_nonpos(e.data(), x.data(), rows * n);
      g.exp_nonpos(ew.data(), x.data(), rows * n);
      EXPECT_TRUE(test::close_rel_max(name + " exp_nonpos", e.data(), ew.data(), rows * n, 1e-6));
    }
}

// head_scores where a path fuses the softmax into its product: the product, then the generic
// softmax or its backward.
TEST(KernelTable, FusedHeadScoresAreTheProductThenTheGenericSoftmax) {
  const CpuKernels g = kernels_for(Isa::generic);
  int fused = 0;
  for (const auto& [name, k] : vector_paths()) {
    if (!k.head_scores) continue;
    ++fused;
    for (int64_t T : {9, 50, 197})
      for (HeadScores mode : {HeadScores::Store, HeadScores::Softmax, HeadScores::SoftmaxBackward}) {
        const int64_t M = 13, D = 24, ldq = D + 5, ldk = (T + 15) / 16 * 16;
        const auto q = test::randn(M * ldq, 52), kT = test::randn(D * ldk, 53);
        const auto km = every_third_masked(T);
        std::vector<float> P = test::randn(M * T, 54);
        g.softmax_rows(P.data(), M, T, nullptr);
        std::vector<float> got(static_cast<size_t>(M * T)), want(got.size());
        k.head_scores(mode, M, T, D, 0.3f, q.data(), ldq, kT.data(), ldk, km.data(), P.data(), got.data(), T);
        g.head_gemm(M, T, D, 0.3f, q.data(), ldq, 1, kT.data(), ldk, 0.f, nullptr, want.data(), T);
        if (mode == HeadScores::Softmax) g.softmax_rows(want.data(), M, T, km.data());
        if (mode == HeadScores::SoftmaxBackward) g.softmax_backward_rows(want.data(), P.data(), M, T);
        EXPECT_TRUE(test::close_rel_max(
            name + " head_scores T " + std::to_string(T) + " mode " + std::to_string(int(mode)), got.data(),
            want.data(), M * T, 1e-5));
      }
  }
  if (isa_supported(Isa::avx512)) {
    EXPECT_EQ(fused, 1) << "avx512's head_scores is fused";
  }
}

// The narrow heads' one-pass backward against the plain loops of dq, dk, dv from P.
TEST(KernelTable, NarrowBackwardOfEveryPathIsThePlainLoops) {
  for (const auto& [name, k] : vector_paths()) {
    int ran = 0;
    for (int64_t D : {1, 4, 8})
      for (int64_t T : {5, 50, 65, 96}) {
        if (!k.attention_backward_narrow_fits(T, D)) continue;
        ++ran;
        const int64_t ld = 3 * D + 2, ldo = D + 1;
        const float scale = 1.f / std::sqrt(float(D));
        const auto qkv = test::randn(T * ld, 55), dO = test::randn(T * ldo, 56);
        const float *q = qkv.data(), *kk = q + D, *v = q + 2 * D;
        std::vector<float> out(static_cast<size_t>(T * ld)), P(static_cast<size_t>(T * T));
        head_forward(out.data(), P.data(), q, kk, v, ld, nullptr, T, D, scale);
        std::vector<float> dqkv(static_cast<size_t>(T * ld), 0.f), want(dqkv.size(), 0.f);
        k.attention_backward_narrow(dqkv.data(), dqkv.data() + D, dqkv.data() + 2 * D, q, kk, v, ld,
                                    dO.data(), ldo, P.data(), T, D, scale);
        float *dq = want.data(), *dk = dq + D, *dv = dq + 2 * D;
        for (int64_t i = 0; i < T; ++i) {
          std::vector<float> dS(static_cast<size_t>(T));
          float dot = 0.f;
          for (int64_t j = 0; j < T; ++j) {
            float dp = 0.f;
            for (int64_t d = 0; d < D; ++d) dp += dO[i * ldo + d] * v[j * ld + d];
            dS[size_t(j)] = dp;
            dot += P[i * T + j] * dp;
          }
          for (int64_t j = 0; j < T; ++j) {
            const float ds = P[i * T + j] * (dS[size_t(j)] - dot);
            for (int64_t d = 0; d < D; ++d) {
              dq[i * ld + d] += scale * ds * kk[j * ld + d];
              dk[j * ld + d] += scale * ds * q[i * ld + d];
              dv[j * ld + d] += P[i * T + j] * dO[i * ldo + d];
            }
          }
        }
        EXPECT_TRUE(test::close_rel_max(
            name + " attention_backward_narrow T " + std::to_string(T) + " D " + std::to_string(D),
            dqkv.data(), want.data(), T * ld, 1e-5));
      }
    EXPECT_GE(ran, 6) << name << ": the narrow backward fit too few shapes";
  }
}

// The forward with samples along the lanes against one head at a time in plain loops, with a
// partial group and a key mask.
TEST(KernelTable, LanesForwardOfEveryPathIsThePlainLoops) {
  for (const auto& [name, k] : vector_paths()) {
    const AttentionLanes& lanes = k.attention_lanes;
    for (int64_t T : {5, 50})
      for (int64_t H : {1, 2}) {
        const int64_t D = 4, C = H * D, n = lanes.group - 1, ld = 3 * C;
        ASSERT_TRUE(lanes.fit(T, C, H)) << name;
        const auto qkv = test::randn(n * T * ld, 57);
        std::vector<uint8_t> km(static_cast<size_t>(n * T));
        for (int64_t i = 0; i < n * T; ++i) km[size_t(i)] = (i * 7) % 5 != 0;
        std::vector<float> out(static_cast<size_t>(n * T * C)), probs(static_cast<size_t>(n * H * T * T));
        lanes.run(out.data(), probs.data(), qkv.data(), km.data(), n, T, C, H);
        std::vector<float> want(out.size()), want_p(probs.size()), o(static_cast<size_t>(T * ld));
        for (int64_t b = 0; b < n; ++b)
          for (int64_t h = 0; h < H; ++h) {
            const float* q = qkv.data() + b * T * ld + h * D;
            head_forward(o.data(), want_p.data() + (b * H + h) * T * T, q, q + C, q + 2 * C, ld,
                         km.data() + b * T, T, D, 1.f / std::sqrt(float(D)));
            for (int64_t t = 0; t < T; ++t)
              for (int64_t d = 0; d < D; ++d)
                want[size_t((b * T + t) * C + h * D + d)] = o[size_t(t * ld + d)];
          }
        const std::string at = name + " lanes T " + std::to_string(T) + " H " + std::to_string(H);
        EXPECT_TRUE(test::close_rel_max(at + " out", out.data(), want.data(), n * T * C, 1e-5));
        EXPECT_TRUE(test::close_rel_max(at + " probs", probs.data(), want_p.data(), n * H * T * T, 1e-5));
      }
  }
}

}  // namespace vit::cpu
