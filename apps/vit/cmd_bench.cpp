// vit bench: time a model's inference or training step on random images and report
// median / min / max ms per batch, images/s, GFLOP/s, % of the matrix-product ceiling
// and peak RSS (text, or one JSON object with --json).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "commands.h"
#include "core/check.h"
#include "core/threads.h"
#include "core/utf8.h"
#include "model_flags.h"
#include "ops/ops.h"
#include "train/bench.h"
#include "validators.h"

namespace vit::app {

Run add_bench(CLI::App& cmd) {
  struct Flags {
    ModelFlags model;
    std::string mode = "infer";
    BenchOptions opt;
    int threads = 0;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  f->model.add_to(cmd);
  cmd.add_option("--mode", f->mode, "infer (forward) or train (forward, loss, backward, AdamW)")
      ->check(CLI::IsMember({"infer", "train"}))
      ->capture_default_str();
  cmd.add_option("-b,--batch-size", f->opt.batch, "images per batch")
      ->check(positive())
      ->capture_default_str();
  cmd.add_option("--threads", f->threads, "threads (default: all cores)")->check(thread_count());
  cmd.add_option("--dtype", f->opt.dtype,
                 "precision of the blocks' matrix products: fp32, bf16 (AVX-512; fp32 accumulation) or int8 "
                 "(inference); with --mode train bf16 is mixed precision, as vit train --amp")
      ->transform(dtype_of({"fp32", "bf16", "int8"}))
      ->capture_default_str();
  cmd.add_option("--shards", f->opt.shards,
                 "data-parallel shards: the batch split into this many shards, one thread each (default: "
                 "one per thread, or VIT_SHARDS; 1 = every operation split across the threads instead)")
      ->check(non_negative());
  cmd.add_option("--warmup", f->opt.warmup, "untimed runs first")
      ->check(non_negative())
      ->capture_default_str();
  cmd.add_option("--runs", f->opt.min_runs, "at least this many timed runs")
      ->check(positive())
      ->capture_default_str();
  CLI::Option* min_time =
      cmd.add_option("--min-time", f->opt.min_seconds,
                     "and at least this many seconds of timed runs (by default ending at 1000 runs)")
          ->check(non_negative())
          ->capture_default_str();
  cmd.add_option("--ceiling", f->opt.ceiling_gflops,
                 "matrix-product GFLOP/s to compare with (default: measure it here after the runs)")
      ->check(positive());
  cmd.add_flag("--json", f->json, "print one JSON object");
  return [f, min_time] {
    const int cpus = omp_get_num_procs();  // the CPUs OpenMP may use (before binding narrows this thread's)
    const ViTConfig cfg = f->model.resolve();
    f->opt.train = f->mode == "train";
    use_threads(f->threads, f->opt.train);  // as vit train has them, or vit eval and predict
    f->opt.max_runs = std::max(f->opt.max_runs, f->opt.min_runs);
    // A --min-time given is kept (mnist-seed's 1000 runs took 0.11 s of --min-time 5).
    if (min_time->count() > 0) f->opt.max_runs = std::max(f->opt.max_runs, 100000000);
    if (f->opt.dtype == "bf16") warn_if_bf16_emulated("--dtype bf16");
    const BenchResult r = run_bench(cfg, f->opt);
    if (f->json) {
      nlohmann::json env = nlohmann::json::object();  // docs/environment.md's variables that are set
      for (const auto& [name, value] : settings_set()) env[name] = value;
      nlohmann::json j = {{"model", f->model.config_file.empty() ? f->model.model : f->model.config_file},
                          {"mode", f->mode},
                          {"batch_size", f->opt.batch},
                          {"threads", num_threads()},
                          {"cpus", cpus},
                          {"threads_bound", threads_bound()},
                          {"isa", ops::cpu_isa()},
                          {"gemm_library", ops::cpu_gemm_library()},
                          {"dtype", f->opt.dtype},
                          {"int8_product", ops::cpu_int8_product()},
                          // Layers too narrow for AMX's tiles run the kernel table's product.
                          {"int8_narrow_product", ops::cpu_int8_table_product()},
                          {"weights_packed", r.weights_packed},
                          {"shards", r.shards},
                          {"runs", r.ms.size()},
                          {"timed_ms", std::accumulate(r.ms.begin(), r.ms.end(), 0.0)},  // the runs' sum
                          {"median_ms", r.median_ms},
                          {"min_ms", r.min_ms},
                          {"max_ms", r.max_ms},
                          {"images_per_s", r.images_per_s},
                          {"gflop_per_image", r.gflop_per_image},
                          {"gflops_per_s", r.gflops_per_s},
                          {"ceiling_gflops", r.ceiling_gflops},
                          {"ceiling_source", r.ceiling_source},
                          {"pct_of_ceiling", r.pct_of_ceiling},
                          {"executed_gflop_per_image", r.executed_gflop_per_image},
                          {"executed_pct_of_ceiling", r.executed_pct_of_ceiling},
                          {"peak_rss_mb", r.peak_rss_mb},
                          {"rss_mb", r.rss_mb},
                          {"environment", env}};
      std::cout << json_for_output(j) << "\n";
      return 0;
    }
    std::printf(
        "%s %s, batch %lld, %d thread%s (%d CPU%s%s, isa %s), %d shard%s, %s%s%s: %zu runs after %d "
        "warm-up\n",
        f->model.model.c_str(), f->mode.c_str(), (long long)f->opt.batch, num_threads(),
        num_threads() == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s",
        threads_bound() ? ", one thread bound to each" : "", ops::cpu_isa(), r.shards,
        r.shards == 1 ? "" : "s", f->opt.dtype.c_str(),
        f->opt.dtype == "int8" ? (std::string(" (") + ops::cpu_int8_product() + " products)").c_str() : "",
        r.weights_packed ? " (packed weights)" : "", r.ms.size(), f->opt.warmup);
    std::printf("  environment: %s\n", environment_line().c_str());
    std::printf("  per batch: median %.3f ms (min %.3f, max %.3f)\n", r.median_ms, r.min_ms, r.max_ms);
    std::printf("  %.2f images/s, %.1f GFLOP/s (%.1f%% of %.0f GFLOP/s, %s)\n", r.images_per_s,
                r.gflops_per_s, r.pct_of_ceiling, r.ceiling_gflops, r.ceiling_source.c_str());
    if (r.executed_gflop_per_image < r.gflop_per_image)
      std::printf("  (the model's FLOPs; vitcpp ran %.1f GFLOP/s of its own, %.1f%%: the class-token tail)\n",
                  r.executed_gflops_per_s, r.executed_pct_of_ceiling);
    std::printf("  peak RSS %.1f MiB, resident after the runs %.1f MiB\n", r.peak_rss_mb, r.rss_mb);
    return 0;
  };
}

}  // namespace vit::app
