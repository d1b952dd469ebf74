// int8 products (backends/cpu/int8.h, kernel_set.h): every gemm_s8 this CPU runs against the
// generic loop, bit for bit, and the generic loop against int64 sums of the unpacked values;
// the quantizers; the linear layer against exact arithmetic on its quantized operands, and on
// any thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"
#include "core/activation.h"
#include "core/check.h"
#include "support/check.h"

namespace vit::cpu {

namespace {
// Random int8 values in [-127, 127]; extreme: each one +-127 (the largest products: the test
// of AVX2's int16 pairs and of VNNI's a + 128).
std::vector<int8_t> random_s8(int64_t n, uint32_t seed, bool extreme) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (int8_t& x : v) x = int8_t(extreme ? (g() & 1 ? 127 : -127) : d(g));
  return v;
}

struct Gemm {
  int64_t M, N, K;
  std::vector<int8_t> A, q;  // A [M, lda], q [N, K] unpacked
  std::shared_ptr<Int8Weights> w;
  int64_t lda;
  Gemm(int64_t M_, int64_t N_, int64_t K_, uint32_t seed, bool extreme) : M(M_), N(N_), K(K_) {
    q = random_s8(N * K, seed, extreme);
    std::vector<float> scale(static_cast<size_t>(N), 1.f);
    w = pack_int8(q.data(), scale.data(), N, K, Int8Product::table);
    lda = w->Kp + 4;  // rows further apart than Kp, the padding columns zero as quantize_rows_s8 leaves them
    A = random_s8(M * lda, seed + 1, extreme);
    for (int64_t m = 0; m < M; ++m) std::fill(A.begin() + m * lda + K, A.begin() + (m + 1) * lda, int8_t(0));
  }
  std::vector<int32_t> run(GemmS8 f) const {
    const int64_t ldc = w->blocks * kS8Block + 3;
    std::vector<int32_t> C(static_cast<size_t>(M * ldc), -7);
    f(C.data(), ldc, A.data(), lda, M, w->q.data(), w->sum.data(), w->blocks, w->Kp);
    std::vector<int32_t> out(static_cast<size_t>(M * N));
    for (int64_t m = 0; m < M; ++m) std::copy_n(C.begin() + m * ldc, N, out.begin() + m * N);
    return out;
  }
};

// "" when equal, else where the first difference is.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want, int64_t N) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      std::ostringstream s;
      s << "first difference at row " << int64_t(i) / N << ", channel " << int64_t(i) % N << ": got "
        << got[i] << ", want " << want[i];
      return s.str();
    }
  return "";
}

const int64_t kShapes[][3] = {{1, 16, 4},    {2, 40, 7},    {3, 64, 64},    {5, 80, 384},
                              {6, 144, 100}, {7, 16, 388},  {13, 48, 1000}, {48, 64, 96},
                              {50, 200, 68}, {4, 32, 3072}, {10, 192, 64}};
}  // namespace

// The generic loop is what its layout says: int64 sums over the unpacked values.
TEST(GemmS8, GenericLoopSumsTheUnpackedValues) {
  for (const auto& s : kShapes) {
    const Gemm g(s[0], s[1], s[2], 11, false);
    const std::vector<int32_t> got = g.run(gemm_s8_reference);
    std::vector<int32_t> want(static_cast<size_t>(g.M * g.N));
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t n = 0; n < g.N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < g.K; ++k)
          acc += int64_t(g.A[static_cast<size_t>(m * g.lda + k)]) * g.q[static_cast<size_t>(n * g.K + k)];
        want[static_cast<size_t>(m * g.N + n)] = int32_t(acc);
        ASSERT_EQ(g.w->at(n, 0), g.q[static_cast<size_t>(n * g.K)]);
      }
    EXPECT_EQ(first_difference(got, want, g.N), "") << s[0] << "x" << s[1] << "x" << s[2];
  }
}

// Every variant this CPU runs (each folder's, not only its pick) gives the generic bits, on
// random values and on all-extreme ones, at every edge of the register tiles.
TEST(GemmS8, EveryVariantGivesTheGenericBits) {
  const auto variants = gemm_s8_variants();
  ASSERT_GE(variants.size(), 1u);
  for (const auto& v : variants)
    for (bool extreme : {false, true})
      for (const auto& s : kShapes) {
        const Gemm g(s[0], s[1], s[2], 5, extreme);
        EXPECT_EQ(first_difference(g.run(v.fn), g.run(gemm_s8_reference), g.N), "")
            << v.name << (extreme ? " (+-127)" : "") << " at " << s[0] << "x" << s[1] << "x" << s[2];
      }
  std::string names;
  for (const auto& v : variants) names += std::string(" ") + v.name;
  RecordProperty("gemm_s8_variants", names);
  std::cout << "gemm_s8 variants checked:" << names << "\n";
}

// oneDNN's int8 matmul (the product on AMX CPUs, int8_product(N, K)) gives the generic bits on
// the same shapes, random and extreme, with rows further apart than K and sums further apart
// than N. On CPUs without AMX oneDNN runs its other int8 kernels here; those are exact too
// where they have VNNI, and not below it (pack_s8_onednn refuses there: checked).
TEST(GemmS8, OnednnGivesTheGenericBits) {
  if (!onednn_int8_exact()) {
    const std::vector<int8_t> q(64, 1);
    const std::vector<float> scale(16, 1.f);
    EXPECT_THROW(pack_int8(q.data(), scale.data(), 16, 4, Int8Product::onednn), Error);
    GTEST_SKIP() << "oneDNN runs below VNNI here: its int8 sums are not exact (docs/design.md)";
  }
  for (bool extreme : {false, true})
    for (const auto& s : kShapes) {
      const Gemm g(s[0], s[1], s[2], 5, extreme);
      std::vector<int8_t> q(g.q);
      std::vector<float> scale(static_cast<size_t>(g.N), 1.f);
      const auto w = pack_int8(q.data(), scale.data(), g.N, g.K, Int8Product::onednn);
      ASSERT_TRUE(w->onednn && w->q.empty());
      const int64_t ldc = g.N + 5;
      std::vector<int32_t> C(static_cast<size_t>(g.M * ldc), -7), got(static_cast<size_t>(g.M * g.N));
      // All rows, then the first alone (oneDNN may want the weights in another layout for
      // one row), then all again.
      for (int64_t M : {g.M, int64_t(1), g.M}) {
        gemm_s8_onednn(C.data(), ldc, g.A.data(), g.lda, M, *w->onednn);
        for (int64_t m = 0; m < M; ++m) std::copy_n(C.begin() + m * ldc, g.N, got.begin() + m * g.N);
        EXPECT_EQ(first_difference(got, g.run(gemm_s8_reference), g.N), "")
            << (extreme ? "(+-127) " : "") << s[0] << "x" << s[1] << "x" << s[2] << ", " << M << " rows";
        for (int64_t m = 0; m < g.M; ++m)
          for (int64_t j = g.N; j < ldc; ++j)
            ASSERT_EQ(C[static_cast<size_t>(m * ldc + j)], -7) << "written past N in row " << m;
      }
    }
}

// oneDNN's product runs the layers at least kAmxMinWidth wide both ways where int8_on_amx();
// narrower ones (mnist-seed's) and every layer elsewhere keep the table's. (int8_on_amx()
// itself against the CPU's flags: CliIsa.Int8RunsOnAmxWhereTheCpuHasIt.)
TEST(GemmS8, OnednnOnlyForWideLayersOnAmx) {
  const Int8Product wide = int8_on_amx() ? Int8Product::onednn : Int8Product::table;
  EXPECT_EQ(int8_product(768, 768), wide);
  EXPECT_EQ(int8_product(kAmxMinWidth, kAmxMinWidth), wide);
  EXPECT_EQ(int8_product(kAmxMinWidth - 1, 768), Int8Product::table);
  EXPECT_EQ(int8_product(768, kAmxMinWidth - 1), Int8Product::table);
  EXPECT_EQ(int8_product(32, 8), Int8Product::table);
  EXPECT_EQ(pack_int8(test::randn(768 * 64, 1).data(), 768, 64)->product, wide);
}

// Each path's table this CPU runs has an int8 product with the generic bits; the path in use
// names its pick, and says it sums four byte products per instruction exactly for the VNNI
// and dot-product kernels (vit info tells users what int8 gains from it).
TEST(GemmS8, EveryPathsTableHasOne) {
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::neon}) {
    if (!isa_supported(i)) continue;
    const CpuKernels k = kernels_for(i);
    ASSERT_NE(k.gemm_s8, nullptr) << isa_name(i);
    ASSERT_NE(k.gemm_s8_name, nullptr) << isa_name(i);
    const std::string name = k.gemm_s8_name;
    EXPECT_EQ(k.gemm_s8_dot, name == "avx512-vnni" || name == "avx-vnni" || name == "neon-dotprod") << name;
    const Gemm g(9, 48, 200, 3, false);
    EXPECT_EQ(first_difference(g.run(k.gemm_s8), g.run(gemm_s8_reference), g.N), "") << k.gemm_s8_name;
  }
  EXPECT_NE(kernels().gemm_s8_name, nullptr);
}

// Every path's row quantization gives the generic bits: random rows of every length around the
// vector widths, ties (127 as the largest value makes the scale 1, so x.5 rounds to even), a
// zero row, a NaN and an infinity.
TEST(Int8Quant, EveryPathGivesTheGenericBits) {
  const auto variants = quantize_row_s8_variants();
  std::vector<std::vector<float>> rows;
  for (int64_t K : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 70, 384})
    rows.push_back(test::randn(K, uint64_t(K)));
  rows.push_back({127.f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, -126.5f, 125.5f, 0.f, -0.f, 4.4999995f});
  rows.push_back(std::vector<float>(19, 0.f));
  rows.push_back({1.f, NAN, 2.f});
  rows.push_back({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, INFINITY, 1.f});
  for (const auto& v : variants)
    for (const auto& x : rows) {
      const int64_t K = int64_t(x.size()), ldq = (K + 3) / 4 * 4 + 4;
      std::vector<int8_t> q(static_cast<size_t>(ldq), 55), want(static_cast<size_t>(ldq), 66);
      const float s = v.fn(q.data(), x.data(), K, ldq),
                  ws = quantize_row_s8_reference(want.data(), x.data(), K, ldq);
      EXPECT_TRUE(std::memcmp(&s, &ws, 4) == 0 || (std::isnan(s) && std::isnan(ws)))
          << v.name << " K " << K << ": scale " << s << ", want " << ws;
      EXPECT_EQ(q, want) << v.name << " K " << K;
    }
  std::vector<int8_t> ties(12);
  quantize_row_s8_reference(ties.data(), rows[15].data(), 11, 12);
  EXPECT_EQ(std::vector<int>(ties.begin(), ties.begin() + 8),
            (std::vector<int>{127, 2, -4, 0, 0, 2, -126, 126}))
      << "to nearest even";
}

// Every path's epilogue gives the generic bits, with and without a bias, at every width
// around the vector lengths.
TEST(Int8Quant, EveryPathsEpilogueGivesTheGenericBits) {
  const int64_t rows = 5, ld = 70;
  std::vector<int32_t> C(static_cast<size_t>(rows * ld));
  std::mt19937 g(4);
  for (int32_t& c : C) c = int32_t(g() % 2000001) - 1000000;
  const std::vector<float> sx = test::randn(rows, 5, 0.01f), sw = test::randn(ld, 6, 0.01f),
                           b = test::randn(ld, 7);
  for (const auto& v : dequant_s8_variants())
    for (int64_t cols : {1, 7, 8, 9, 15, 16, 17, 33, 64})
      for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
        std::vector<float> got(static_cast<size_t>(rows * ld), 9.f), want(got);
        v.fn(got.data(), ld, C.data(), ld, sx.data(), sw.data(), bias, rows, cols);
        dequant_s8_reference(want.data(), ld, C.data(), ld, sx.data(), sw.data(), bias, rows, cols);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()), 0)
            << v.name << " cols " << cols << (bias ? " with" : " without") << " a bias";
      }
}

TEST(Int8Quant, RowsAreWithinHalfAStepAndPadded) {
  const int64_t M = 4, K = 37, ld = 40;
  std::vector<float> x = test::randn(M * K, 8);
  std::fill(x.begin() + K, x.begin() + 2 * K, 0.f);  // row 1: zeros
  x[static_cast<size_t>(2 * K + 5)] = NAN;           // row 2: a NaN
  std::vector<int8_t> q(static_cast<size_t>(M * ld), 99);
  std::vector<float> s(static_cast<size_t>(M));
  quantize_rows_s8(q.data(), ld, s.data(), x.data(), M, K);
  EXPECT_EQ(s[1], 0.f);
  EXPECT_TRUE(std::isnan(s[2]));
  for (int64_t m : {0, 3}) {
    int amax = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int v = q[static_cast<size_t>(m * ld + k)];
      amax = std::max(amax, std::abs(v));
      EXPECT_LE(std::fabs(x[static_cast<size_t>(m * K + k)] - s[static_cast<size_t>(m)] * v),
                0.5001f * s[static_cast<size_t>(m)])
          << m << "," << k;
    }
    EXPECT_EQ(amax, 127) << "row " << m << " uses the full range";
  }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = K; k < ld; ++k)
      EXPECT_EQ(q[static_cast<size_t>(m * ld + k)], 0) << "padding of row " << m;
  for (int64_t k = 0; k < K; ++k) EXPECT_EQ(q[static_cast<size_t>(2 * ld + k)], 0) << "the NaN row's values";
}

// Weights dequantized (q * scale: what an int8 checkpoint loads into) quantize to the same
// values and the same scale bits: a quantized checkpoint reloads exactly.
TEST(Int8Quant, DequantizedWeightsQuantizeToTheSameBits) {
  const int64_t N = 300, K = 64;
  const std::vector<float> w = test::randn(N * K, 9, 0.05f);
  std::vector<int8_t> q(static_cast<size_t>(N * K)), q2(static_cast<size_t>(N * K));
  std::vector<float> s(static_cast<size_t>(N)), s2(static_cast<size_t>(N)), back(static_cast<size_t>(N * K));
  quantize_weights_s8(q.data(), s.data(), w.data(), N, K);
  for (int64_t i = 0; i < N * K; ++i)
    back[static_cast<size_t>(i)] = q[static_cast<size_t>(i)] * s[static_cast<size_t>(i / K)];
  quantize_weights_s8(q2.data(), s2.data(), back.data(), N, K);
  EXPECT_EQ(q, q2);
  EXPECT_EQ(std::memcmp(s.data(), s2.data(), sizeof(float) * static_cast<size_t>(N)), 0);
}

// The products the layer can run here: the table's, and oneDNN's where its sums are exact.
std::vector<Int8Product> layer_products() {
  std::vector<Int8Product> v{Int8Product::table};
  if (onednn_int8_exact()) v.push_back(Int8Product::onednn);
  return v;
}

const char* product_name(Int8Product p) {
  return p == Int8Product::table ? "table" : "onednn";
}

// y = sx sw (sum of the s8 products) + b as exact arithmetic gives it (doubles), GELU of the same
// when asked, the same bits on 1 and 2 threads and with either product, and near fp32's
// product. 400 rows of 2040 outputs: two of the onednn product's chunks (384 rows: about 3 MiB
// of sums), at a width that is not a multiple of a vector.
TEST(LinearInt8, IsItsQuantizedOperandsProductOnAnyThreadCount) {
  const int64_t M = 400, N = 2040, K = 20;
  const size_t MN = static_cast<size_t>(M * N);
  const std::vector<float> x = test::randn(M * K, 1), w = test::randn(N * K, 2, 0.1f), b = test::randn(N, 3);
  std::vector<int8_t> q(static_cast<size_t>(N * K));
  std::vector<float> scale(static_cast<size_t>(N));
  quantize_weights_s8(q.data(), scale.data(), w.data(), N, K);
  std::vector<float> want(MN), fp32(MN), table;
  std::vector<int8_t> xq(static_cast<size_t>(M * K));
  std::vector<float> sx(static_cast<size_t>(M));
  quantize_rows_s8(xq.data(), K, sx.data(), x.data(), M, K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      double f = b[static_cast<size_t>(n)];
      for (int64_t k = 0; k < K; ++k) {
        acc += int64_t(xq[static_cast<size_t>(m * K + k)]) * q[static_cast<size_t>(n * K + k)];
        f += double(x[static_cast<size_t>(m * K + k)]) * w[static_cast<size_t>(n * K + k)];
      }
      want[static_cast<size_t>(m * N + n)] =
          float(double(acc) * sx[static_cast<size_t>(m)] * scale[static_cast<size_t>(n)] +
                b[static_cast<size_t>(n)]);
      fp32[static_cast<size_t>(m * N + n)] = float(f);
    }
  for (const Int8Product product : layer_products()) {
    SCOPED_TRACE(product_name(product));
    const auto pw = pack_int8(w.data(), N, K, product);
    std::vector<float> y1(MN), y2(MN), yg(MN);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    linear_forward_int8(y1.data(), x.data(), *pw, b.data(), M, false);
    omp_set_num_threads(2);
    linear_forward_int8(y2.data(), x.data(), *pw, b.data(), M, false);
    linear_forward_int8(yg.data(), x.data(), *pw, b.data(), M, true);
    omp_set_num_threads(saved);
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), sizeof(float) * MN), 0) << "1 vs 2 threads";
    if (table.empty())
      table = y1;
    else
      EXPECT_EQ(std::memcmp(y1.data(), table.data(), sizeof(float) * MN), 0) << "the table product's bits";
    EXPECT_TRUE(test::close_rel_max("int8 linear vs exact", y1.data(), want.data(), M * N, 1e-6));
    EXPECT_TRUE(test::close_rel_max("int8 linear vs fp32", y1.data(), fp32.data(), M * N, 2e-2));
    std::vector<float> g(y1);
    gelu_forward_reference(g.data(), y1.data(), M * N);
    EXPECT_TRUE(test::close_rel_max("GELU epilogue", yg.data(), g.data(), M * N, 1e-6));
  }
}

// The int8 MLP, a chunk of rows at a time, has the bits of its two layers run one after the
// other with the activation between them: every activation, either product, 1 and 2 threads,
// 400 rows (two chunks of the 2040-wide hidden layer: 384 rows) and widths that are not
// multiples of a vector.
TEST(LinearInt8, TheMlpIsItsTwoLayersInChunks) {
  const int64_t M = 400, C = 20, Hd = 2040, N = 24;
  const size_t MN = static_cast<size_t>(M * N);
  const std::vector<float> x = test::randn(M * C, 4), w1 = test::randn(Hd * C, 5, 0.1f),
                           b1 = test::randn(Hd, 6), w2 = test::randn(N * Hd, 7, 0.1f), b2 = test::randn(N, 8);
  for (const Int8Product product : layer_products())
    for (const Activation act : {Activation::gelu, Activation::gelu_tanh, Activation::quick_gelu}) {
      SCOPED_TRACE(std::string(product_name(product)) + " " + activation_name(act));
      const auto fc1 = pack_int8(w1.data(), Hd, C, product), fc2 = pack_int8(w2.data(), N, Hd, product);
      std::vector<float> h(static_cast<size_t>(M * Hd)), want(MN);
      linear_forward_int8(h.data(), x.data(), *fc1, b1.data(), M, false);
      act_forward(h.data(), h.data(), M * Hd, act);
      linear_forward_int8(want.data(), h.data(), *fc2, b2.data(), M, false);
      const int saved = omp_get_max_threads();
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> y(MN, 9.f);
        mlp_forward_int8(y.data(), x.data(), *fc1, b1.data(), *fc2, b2.data(), M, act);
        EXPECT_TRUE(test::close_rel_max("int8 MLP vs its layers", y.data(), want.data(), M * N, 0.0))
            << threads;
      }
      omp_set_num_threads(saved);
    }
}

// Called from inside a parallel region (a caller's own OpenMP threads, each running a model)
// and from two threads at once on the same weights, the layer gives its serial bits.
// oneDNN's primitives split their work for the thread count they were made for; inside a
// parallel region its loop runs on the calling thread alone, so one made for two threads
// computed half the sums there.
TEST(LinearInt8, InsideAParallelRegionAndFromTwoThreads) {
  const int64_t M = 384, N = 512, K = 256;
  const size_t MN = static_cast<size_t>(M * N);
  const std::vector<float> x = test::randn(M * K, 1), w = test::randn(N * K, 2, 0.1f), b = test::randn(N, 3);
  for (const Int8Product product : layer_products()) {
    SCOPED_TRACE(product_name(product));
    // The serial bits from the table's product (both give the same: the tests above); pw's
    // primitives are made inside the region.
    const auto pw = pack_int8(w.data(), N, K, product);
    std::vector<float> want(MN), a(MN, 9.f), c(MN, 9.f);
    linear_forward_int8(want.data(), x.data(), *pack_int8(w.data(), N, K, Int8Product::table), b.data(), M,
                        true);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);
#pragma omp parallel num_threads(2)
    {
      // Both threads at once, each asking for two threads inside the region.
      omp_set_num_threads(2);
      std::vector<float>& y = omp_get_thread_num() == 0 ? a : c;
      linear_forward_int8(y.data(), x.data(), *pw, b.data(), M, true);
    }
    omp_set_num_threads(saved);
    EXPECT_TRUE(test::close_rel_max("thread 0 of a parallel region", a.data(), want.data(), M * N, 0.0));
    EXPECT_TRUE(test::close_rel_max("thread 1 of a parallel region", c.data(), want.data(), M * N, 0.0));
  }
}

}  // namespace vit::cpu
