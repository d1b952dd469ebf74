// Matrix-product rate on the shapes a ViT runs, through vitcpp's gemm (oneDNN) and, when
// the build found it, OpenBLAS's cblas_sgemm: the measurement behind choosing oneDNN.
// OpenBLAS picks its kernels from OPENBLAS_CORETYPE at load time (this machine presets
// Haswell, i.e. AVX2); run it with OPENBLAS_CORETYPE=SkylakeX to see its AVX-512 kernels.
// peak/<isa>: the rate of fused multiply-adds alone, on every thread, for each vector width
// this CPU runs: the ceiling no product can pass, to say how close the library's is to it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_set.h"
#include "core/arena.h"
#include "core/threads.h"
#ifdef VIT_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace {

struct Shape {
  int64_t M, N, K;
  bool ta, tb;
  const char* what;
};

// cifar-seed batch 256 (16640 token rows, 192 dims) and ViT-B/16 (197 and 16 x 197 rows).
const Shape kShapes[] = {
    {16640, 576, 192, false, true, "cifar qkv fwd"}, {16640, 192, 768, false, true, "cifar fc2 fwd"},
    {576, 192, 16640, true, false, "cifar qkv dW"},  {16640, 192, 576, false, false, "cifar qkv dX"},
    {197, 2304, 768, false, true, "vitb qkv b1"},    {3152, 3072, 768, false, true, "vitb fc1 b16"},
    {3152, 768, 3072, false, true, "vitb fc2 b16"},  {2048, 2048, 2048, false, false, "square 2048"},
};

void run(benchmark::State& st, const Shape& s, bool openblas) {
  vit::Arena A(size_t(s.M * s.K)), B(size_t(s.K * s.N)),
      C(size_t(s.M * s.N));  // 64-byte aligned, as the model's
  std::fill_n(A.data(), s.M * s.K, 0.5f);
  std::fill_n(B.data(), s.K * s.N, 0.25f);
  const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
  for (auto _ : st) {
#ifdef VIT_HAVE_OPENBLAS
    if (openblas) {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, int(s.M),
                  int(s.N), int(s.K), 1.f, A.data(), int(lda), B.data(), int(ldb), 0.f, C.data(), int(s.N));
      continue;
    }
#endif
    (void)openblas;
    vit::cpu::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), s.N);
    benchmark::DoNotOptimize(C.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * s.M * s.N * s.K / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Acc independent chains a = a * b + c on vectors V (GCC's vector extensions; this
// file is compiled with -ffp-contract=fast, so each is one FMA instruction): enough chains to
// cover the FMA latency (4 cycles) times the FMA pipes (2 on x86, up to 4 on aarch64), few
// enough to stay in registers. b < 1 and c > 0 hold every lane near c / (1 - b) = 1.
typedef float F32x4 __attribute__((vector_size(16)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef float F32x16 __attribute__((vector_size(64)));

template <typename V, int Acc>
[[gnu::always_inline]] inline float fma_chains(int64_t iters) {
  constexpr int kLanes = int(sizeof(V) / sizeof(float));
  // Read through volatile, so that the compiler cannot fold a chain whose start is its fixed point.
  volatile float b0 = 0.999999f, c0 = 1e-6f, a0 = 1.f;
  V a[Acc], b, c;
  for (int l = 0; l < kLanes; ++l) b[l] = b0, c[l] = c0;
#pragma GCC unroll 32
  for (int i = 0; i < Acc; ++i)
    for (int l = 0; l < kLanes; ++l) a[i][l] = a0 + 0.001f * float(i);
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 32
    for (int i = 0; i < Acc; ++i) a[i] = a[i] * b + c;
  }
  float s = 0;
  for (int i = 0; i < Acc; ++i) s += a[i][0];
  return s;
}

struct Peak {
  const char* name;
  float (*chains)(int64_t);
  int flops_per_iter;  // 2 x lanes x chains
};
#if VIT_ISA_X86
[[gnu::target("avx2,fma")]] float peak_avx2(int64_t n) {
  return fma_chains<F32x8, 12>(n);
}
[[gnu::target("avx512f")]] float peak_avx512(int64_t n) {
  return fma_chains<F32x16, 16>(n);
}
#elif VIT_ISA_NEON
float peak_neon(int64_t n) {
  return fma_chains<F32x4, 24>(n);
}
#endif

void run_peak(benchmark::State& st, const Peak& p) {
  constexpr int64_t kIters = 1 << 22;
  const int n = vit::num_threads();
  std::vector<float> sink(size_t(n), 0.f);
  for (auto _ : st) vit::run_on_threads(n, [&](int t) { sink[size_t(t)] += p.chains(kIters); });
  benchmark::DoNotOptimize(sink.data());
  st.counters["GFLOP/s"] = benchmark::Counter(double(n) * kIters * p.flops_per_iter / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  st.counters["threads"] = n;
}

// The int8 linear layer's forward (y = x w^T, int8.h) on the forward shapes above: the whole
// layer (quantizing x, the products on every thread, the fp32 epilogue) with each product as
// "int8/table/" and "int8/onednn/" (the one int8_product() picks labelled "picked"), each
// gemm_s8 variant this CPU runs alone on one thread over every row and block as
// "gemm_s8/<variant>/", and oneDNN's s8 x s8 -> s32 matmul (AMX tiles where the CPU has them)
// as "gemm_s8/onednn/" on OpenMP's threads where its sums are exact (VNNI or AMX; GOP/s: 2 M
// N K integer operations per second).
std::vector<float> int8_weights(const Shape& s) {
  std::vector<float> w(size_t(s.N * s.K));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 255) - 127) / 127.f;
  return w;
}

void set_gops(benchmark::State& st, const Shape& s) {
  st.counters["GOP/s"] =
      benchmark::Counter(2.0 * s.M * s.N * s.K / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void run_int8_layer(benchmark::State& st, const Shape& s, vit::cpu::Int8Product product) {
  std::vector<float> x(size_t(s.M * s.K), 0.5f), y(size_t(s.M * s.N));
  const auto pw = vit::cpu::pack_int8(int8_weights(s).data(), s.N, s.K, product);
  for (auto _ : st) {
    vit::cpu::linear_forward_int8(y.data(), x.data(), *pw, nullptr, s.M, false);
    benchmark::DoNotOptimize(y.data());
  }
  if (product == vit::cpu::int8_product(s.N, s.K)) st.SetLabel("picked");
  set_gops(st, s);
}

void run_gemm_s8(benchmark::State& st, const Shape& s, vit::cpu::GemmS8 f) {
  const auto pw = vit::cpu::pack_int8(int8_weights(s).data(), s.N, s.K, vit::cpu::Int8Product::table);
  std::vector<int8_t> A(size_t(s.M * pw->Kp), 3);
  std::vector<int32_t> C(size_t(s.M * pw->blocks * vit::cpu::kS8Block));
  for (auto _ : st) {
    f(C.data(), pw->blocks * vit::cpu::kS8Block, A.data(), pw->Kp, s.M, pw->q.data(), pw->sum.data(),
      pw->blocks, pw->Kp);
    benchmark::DoNotOptimize(C.data());
  }
  set_gops(st, s);
}

void run_gemm_s8_onednn(benchmark::State& st, const Shape& s) {
  const auto pw = vit::cpu::pack_int8(int8_weights(s).data(), s.N, s.K, vit::cpu::Int8Product::onednn);
  std::vector<int8_t> A(size_t(s.M * pw->Kp), 3);
  std::vector<int32_t> C(size_t(s.M * s.N));
  for (auto _ : st) {
    vit::cpu::gemm_s8_onednn(C.data(), s.N, A.data(), pw->Kp, s.M, *pw->onednn);
    benchmark::DoNotOptimize(C.data());
  }
  set_gops(st, s);
}

}  // namespace

int main(int argc, char** argv) {
  using vit::cpu::Int8Product;
  using vit::cpu::Isa;
  std::vector<Peak> peaks;
#if VIT_ISA_X86
  if (vit::cpu::isa_supported(Isa::avx2)) peaks.push_back({"peak/avx2", peak_avx2, 2 * 8 * 12});
  if (vit::cpu::isa_supported(Isa::avx512)) peaks.push_back({"peak/avx512", peak_avx512, 2 * 16 * 16});
#elif VIT_ISA_NEON
  peaks.push_back({"peak/neon", peak_neon, 2 * 4 * 24});
#endif
  for (const Peak& p : peaks) benchmark::RegisterBenchmark(p.name, run_peak, p)->UseRealTime()->MinTime(0.3);
  for (const Shape& s : kShapes) {
    const std::string dims = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) +
                             (s.ta ? "T" : "N") + (s.tb ? "T" : "N");
    benchmark::RegisterBenchmark(("onednn/" + dims).c_str(), run, s, false)->UseRealTime()->MinTime(0.3);
#ifdef VIT_HAVE_OPENBLAS
    benchmark::RegisterBenchmark(("openblas/" + dims).c_str(), run, s, true)->UseRealTime()->MinTime(0.3);
#endif
  }
  for (const Shape& s : kShapes) {
    if (s.ta || !s.tb) continue;  // forward products only: int8 is for inference
    const std::string dims = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
    for (const auto product : {Int8Product::table, Int8Product::onednn}) {
      if (product == Int8Product::onednn && !vit::cpu::onednn_int8_exact()) continue;  // refused here
      const std::string name =
          std::string("int8/") + (product == Int8Product::table ? "table/" : "onednn/") + dims;
      benchmark::RegisterBenchmark(name.c_str(), run_int8_layer, s, product)->UseRealTime()->MinTime(0.3);
    }
    if (vit::cpu::onednn_int8_exact())
      benchmark::RegisterBenchmark(("gemm_s8/onednn/" + dims).c_str(), run_gemm_s8_onednn, s)
          ->UseRealTime()
          ->MinTime(0.2);
    for (const auto& v : vit::cpu::gemm_s8_variants())
      benchmark::RegisterBenchmark((std::string("gemm_s8/") + v.name + "/" + dims).c_str(), run_gemm_s8, s,
                                   v.fn)
          ->UseRealTime()
          ->MinTime(0.2);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
