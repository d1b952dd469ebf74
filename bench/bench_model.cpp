// Forward (inference) and training-step throughput of whole models, with Google Benchmark.
// Reports images/s, GFLOP/s and the share of this machine's measured matrix-product
// ceiling. A training step is counted as 3x the forward FLOPs (forward + backward), the
// usual estimate. Threads: VIT_THREADS (default: all cores).
//
//   build/bench/bench_model --benchmark_filter=mnist   (one model)
//   build/bench/bench_model --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "model/vit.h"
#include "train/optimizer.h"
#include "train/step.h"

namespace {

// Best sgemm rate measured on this machine's 2 Zen 5 cores (oneDNN, bench_gemm): the
// ceiling the engine's GFLOP/s are compared with.
constexpr double kCeilingGflops = 428.0;

std::vector<float> random_images(const vit::ViTConfig& c, int64_t B) {
  vit::Rng rng(1);
  std::vector<float> x(B * c.in_chans * c.img_h * c.img_w);
  for (auto& v : x) v = float(rng.normal());
  return x;
}

// Times every iteration with a steady clock and reports plain numbers (rate counters
// would print a misleading "/s" after GFLOP/s and percentages).
template <typename F>
void timed(benchmark::State& st, const vit::ViTConfig& c, int64_t B, double flops_factor, F&& one) {
  double seconds = 0;
  int64_t n = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    one();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++n;
  }
  const double flops = double(vit::forward_flops(c)) * double(B) * flops_factor * double(n);
  st.counters["img_per_s"] = double(B) * double(n) / seconds;
  st.counters["GFLOP_per_s"] = flops / 1e9 / seconds;
  st.counters["pct_of_ceiling"] = 100.0 * flops / 1e9 / seconds / kCeilingGflops;
}

void infer(benchmark::State& st, const std::string& preset, int64_t B) {
  const vit::ViTConfig c = vit::preset(preset);
  vit::ViT model(c);
  const auto x = random_images(c, B);
  std::vector<float> logits(B * c.num_classes);
  model.infer(x.data(), B, nullptr, logits.data());  // warm-up: allocate and fault in
  timed(st, c, B, 1.0, [&] {
    model.infer(x.data(), B, nullptr, logits.data());
    benchmark::DoNotOptimize(logits.data());
  });
}

void train_step(benchmark::State& st, const std::string& preset, int64_t B) {
  const vit::ViTConfig c = vit::preset(preset);
  vit::ViT model(c);
  const auto x = random_images(c, B);
  std::vector<int64_t> labels(B);
  for (int64_t b = 0; b < B; ++b) labels[b] = b % c.num_classes;
  vit::Optimizer opt(model.table(), vit::OptimConfig{});  // AdamW
  vit::LossStep step;
  uint64_t t = 0;
  auto one = [&] {
    model.zero_grad();
    step.run(model, vit::Batch{x.data(), B, labels.data(), nullptr, nullptr}, 0.f,
             vit::ForwardMode{true, 0, t++});
    opt.step(model.params().data(), model.grads().data(), 1e-4f);
  };
  one();  // warm-up
  timed(st, c, B, 3.0, one);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* t = std::getenv("VIT_THREADS")) vit::set_num_threads(std::atoi(t));
  struct Case {
    const char* model;
    int64_t batch;
    bool train;
    int iterations;  // 0: let the library decide
  };
  const Case cases[] = {{"mnist-seed", 128, false, 0}, {"mnist-seed", 128, true, 0},
                        {"mnist-small", 128, true, 0}, {"cifar-seed", 256, false, 0},
                        {"cifar-seed", 256, true, 2},  {"vit-tiny-16", 1, false, 0},
                        {"vit-small-16", 1, false, 0}, {"vit-base-16", 1, false, 0},
                        {"vit-base-16", 16, false, 1}, {"vit-base-16", 16, true, 1}};
  for (const Case& k : cases) {
    const std::string name =
        std::string(k.train ? "Train/" : "Infer/") + k.model + "/b" + std::to_string(k.batch);
    auto* b = k.train ? benchmark::RegisterBenchmark(name.c_str(), train_step, std::string(k.model), k.batch)
                      : benchmark::RegisterBenchmark(name.c_str(), infer, std::string(k.model), k.batch);
    b->Unit(benchmark::kMillisecond)->UseRealTime();
    if (k.iterations) b->Iterations(k.iterations);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
