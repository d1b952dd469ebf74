// Refusing a training run that cannot fit in memory before it starts, rather than being
// killed by the OOM killer an hour in. The plan counts what vitcpp itself allocates:
// parameters, gradients, optimizer moments, the training and evaluation activation arenas
// (their planned sizes for the batch), and the prefetcher's two batch buffers. Libraries'
// workspaces (oneDNN) and the dataset (already loaded when the check runs) are not counted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.h"

namespace vit {

struct MemoryPlan {
  size_t params = 0, grads = 0, optimizer = 0, activations = 0, eval_activations = 0, batches = 0;
  int shards = 1;  // data-parallel shards, each with its own gradients (grads = shards x params)
  size_t total() const { return params + grads + optimizer + activations + eval_activations + batches; }
  std::string describe() const;  // "1.2 GiB (params 10 MiB, grads 10 MiB, ...)"
};

// optimizer: sgd (one moment) or adam/adamw (two). shards: the model's data-parallel shards
// (ViT::set_shards; 0 = one per thread, the default), each with its own gradients. amp: the
// bf16 copies of mixed-precision training (ViT::set_amp) in activations.
MemoryPlan plan_training_memory(const ViTConfig& cfg, int64_t batch, const std::string& optimizer,
                                int shards = 0, bool amp = false);

// What the run may use: VIT_MEMORY_LIMIT when set (bytes, or with a K/M/G/T suffix, powers
// of 1024), else MemAvailable from /proc/meminfo; 0 when neither is known.
size_t available_memory_bytes();

// Throws vit::Error naming the need, the limit and the way around (--no-memory-check)
// when need exceeds available (available 0 = unknown: no check).
void check_memory(const MemoryPlan& plan, size_t available, const std::string& what);

std::string format_bytes(size_t bytes);

}  // namespace vit
