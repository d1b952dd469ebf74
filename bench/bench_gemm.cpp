// Matrix-product rate on the shapes a ViT runs, through vitcpp's gemm (oneDNN) and, when
// the build found it, OpenBLAS's cblas_sgemm: the measurement behind choosing oneDNN.
// OpenBLAS picks its kernels from OPENBLAS_CORETYPE at load time (this machine presets
// Haswell, i.e. AVX2); run it with OPENBLAS_CORETYPE=SkylakeX to see its AVX-512 kernels.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "backends/cpu/cpu.h"
#include "vit/core/arena.h"
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

}  // namespace

int main(int argc, char** argv) {
  for (const Shape& s : kShapes) {
    const std::string dims = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) +
                             (s.ta ? "T" : "N") + (s.tb ? "T" : "N");
    benchmark::RegisterBenchmark(("onednn/" + dims).c_str(), run, s, false)->UseRealTime()->MinTime(0.3);
#ifdef VIT_HAVE_OPENBLAS
    benchmark::RegisterBenchmark(("openblas/" + dims).c_str(), run, s, true)->UseRealTime()->MinTime(0.3);
#endif
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
