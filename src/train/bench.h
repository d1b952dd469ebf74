// Timing of whole models: `vit bench` and bench/peers. A forward pass (inference) or a
// training step (forward, cross-entropy, backward, AdamW) on random images, after warm-up
// runs, repeated; median, min and max per batch, images/s, GFLOP/s and the share of a
// matrix-product ceiling (measured here with the same threads, or given), peak RSS.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace vit {

struct BenchOptions {
  bool train = false;
  int64_t batch = 1;
  int warmup = 2;          // untimed runs first (allocation, page faults, caches)
  int min_runs = 5;        // timed runs: at least this many ...
  double min_seconds = 2;  // ... and at least this long in total
  int max_runs = 1000;
  double ceiling_gflops = 0;   // 0: measure the matrix-product rate here first
  std::string dtype = "fp32";  // fp32 or bf16: inference ViT::set_infer_dtype, training ViT::set_amp
  int shards = 0;              // ViT::set_shards: 0 = the model's default, 1 = no shards
};

struct BenchResult {
  std::vector<double> ms;  // every timed run, in order
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double images_per_s = 0;     // at the median
  double gflop_per_image = 0;  // the model's forward FLOPs, x3 for a training step
  double gflops_per_s = 0;     // at the median
  double ceiling_gflops = 0;
  std::string ceiling_source;  // "measured: ..." or "given"
  double pct_of_ceiling = 0;
  // The same for the FLOPs vitcpp runs (fewer with the class-token tail: forward_flops).
  double executed_gflop_per_image = 0, executed_gflops_per_s = 0, executed_pct_of_ceiling = 0;
  bool weights_packed = false;  // fp32 inference on in-place packed weights (ViT::pack_weights)
  int shards = 1;               // data-parallel shards the batch ran in (ViT::shards_for)
  double peak_rss_mb = 0;       // of the whole process so far (getrusage)
  double rss_mb = 0;            // resident after the timed runs (what serving this model holds)
};

// The rate of the engine's matrix product on ViT-B/16's fc1 shape at batch 16
// (3152 x 3072 x 768, y = x w^T), the best-case shape measured in docs/history/benchmarks-2026-11.md:
// median GFLOP/s of a few runs with the current thread count.
double measure_matmul_gflops(double seconds = 0.5);

BenchResult run_bench(const ViTConfig& cfg, const BenchOptions& opt);

// Peak resident set size of this process in MiB.
double peak_rss_mb();
// Resident set size of this process now, in MiB (VmRSS of /proc/self/status; 0 where absent).
double rss_mb();

}  // namespace vit
