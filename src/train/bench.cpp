// vit bench's timing loop (see vit/train/bench.h).
#include "train/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/arena.h"
#include "core/check.h"
#include "core/rng.h"
#include "model/vit.h"
#include "ops/ops.h"
#include "train/optimizer.h"
#include "train/step.h"

namespace vit {

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Warm-up runs, then timed runs until both min_runs and min_seconds are reached.
template <typename F>
std::vector<double> time_runs(const BenchOptions& o, F&& one) {
  for (int i = 0; i < o.warmup; ++i) one();
  std::vector<double> ms;
  double total = 0;
  while (int(ms.size()) < o.max_runs && (int(ms.size()) < o.min_runs || total < o.min_seconds * 1e3)) {
    const double t0 = now_ms();
    one();
    ms.push_back(now_ms() - t0);
    total += ms.back();
  }
  return ms;
}

}  // namespace

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

double rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;  // "VmRSS:  123 kB"
  return 0;
}

double measure_matmul_gflops(double seconds) {
  const int64_t M = 3152, N = 3072, K = 768;
  // In arenas, 64-byte aligned like the model's tensors: a std::vector starts 16 bytes into
  // a cache line here, which slows the product (docs/history/benchmarks-2026-11.md, "One more
  // thing measured: ViT-B/16 at batch 1").
  Arena x(M * K), w(N * K), y(M * N);
  std::fill_n(x.data(), M * K, 0.5f);
  std::fill_n(w.data(), N * K, 0.25f);
  Tensor tx(x.data(), {M, K}), tw(w.data(), {N, K}), ty(y.data(), {M, N});
  BenchOptions o;
  o.warmup = 1;
  o.min_runs = 3;
  o.min_seconds = seconds;
  const ops::LinearWeights lw(tw);
  const auto ms = time_runs(o, [&] { ops::linear_forward(ty, tx, lw); });
  return 2.0 * M * N * K / 1e9 / (median(ms) / 1e3);
}

BenchResult run_bench(const ViTConfig& cfg, const BenchOptions& opt) {
  VIT_VALUE_CHECK(opt.batch > 0, "bench: batch size must be positive, got ", opt.batch);
  VIT_VALUE_CHECK(opt.min_runs > 0 && opt.max_runs >= opt.min_runs, "bench: need 0 < min runs <= max runs");
  ViT model(cfg);
  if (opt.train) {  // bf16 training is mixed precision: fp32 weights, bf16 products (--amp)
    VIT_CHECK(opt.dtype == "fp32" || opt.dtype == "bf16", "--dtype ", opt.dtype,
              ": training runs in fp32 or bf16 (int8 is for inference: --mode infer)");
    VIT_CHECK(opt.dtype != "bf16" || ops::bf16_available(), "--dtype bf16: ", ops::bf16_missing());
    model.set_amp(opt.dtype == "bf16");  // "--amp: ..." would name a flag vit bench has not
  } else {
    try {
      model.set_infer_dtype(opt.dtype, /*release_fp32=*/opt.dtype != "fp32");  // bf16, int8 only infer
    } catch (const Error& e) {
      throw std::string_view(e.what()).rfind("dtype", 0) == 0 ? Error(std::string("--") + e.what())
                                                              : e;  // "--dtype bf16: ...", vit bench's flag
    }
  }
  if (opt.shards > 0) model.set_shards(opt.shards);
  const int64_t B = opt.batch, K = cfg.num_classes;
  Rng rng(1);
  std::vector<float> images(B * cfg.in_chans * cfg.img_h * cfg.img_w);
  for (auto& v : images) v = float(rng.normal());
  BenchResult r;
  if (!opt.train) r.weights_packed = model.pack_weights_if_faster(opt.batch);
  r.shards = opt.train ? model.shards_for(B) : model.infer_shards(B);
  if (opt.train) {
    std::vector<int64_t> labels(B);
    for (int64_t b = 0; b < B; ++b) labels[b] = b % K;
    Optimizer adamw(model.table(), OptimConfig{});
    LossStep step;
    uint64_t t = 0;
    r.ms = time_runs(opt, [&] {
      model.zero_grad();
      step.run(model, Batch{images.data(), B, labels.data(), nullptr, nullptr}, 0.f,
               ForwardMode{true, 0, t++});
      adamw.step(model.params().data(), model.grads().data(), 1e-4f);
    });
  } else {
    std::vector<float> logits(B * K);
    r.ms = time_runs(opt, [&] { model.infer(images.data(), B, nullptr, logits.data()); });
  }
  r.peak_rss_mb = peak_rss_mb();  // before the ceiling measurement's buffers
  r.rss_mb = rss_mb();
  r.median_ms = median(r.ms);
  r.min_ms = *std::min_element(r.ms.begin(), r.ms.end());
  r.max_ms = *std::max_element(r.ms.begin(), r.ms.end());
  r.images_per_s = double(B) / (r.median_ms / 1e3);
  r.gflop_per_image = double(forward_flops(cfg)) / 1e9 * (opt.train ? 3.0 : 1.0);
  r.gflops_per_s = r.gflop_per_image * r.images_per_s;
  if (opt.ceiling_gflops > 0) {
    r.ceiling_gflops = opt.ceiling_gflops;
    r.ceiling_source = "given";
  } else {
    r.ceiling_gflops = measure_matmul_gflops();
    r.ceiling_source = "measured: sgemm 3152x3072x768 (ViT-B/16 fc1, batch 16), same threads";
  }
  r.pct_of_ceiling = 100.0 * r.gflops_per_s / r.ceiling_gflops;
  r.executed_gflop_per_image =
      double(forward_flops(cfg, model.use_cls_tail())) / 1e9 * (opt.train ? 3.0 : 1.0);
  r.executed_gflops_per_s = r.executed_gflop_per_image * r.images_per_s;
  r.executed_pct_of_ceiling = 100.0 * r.executed_gflops_per_s / r.ceiling_gflops;
  return r;
}

}  // namespace vit
