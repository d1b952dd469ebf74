#include "train/memory.h"
#include "core/settings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/threads.h"
#include "model/params.h"
#include "model/vit.h"

namespace vit {

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string MemoryPlan::describe() const {
  return detail::concat(
      format_bytes(total()), " (params ", format_bytes(params), ", grads ", format_bytes(grads),
      shards > 1 ? detail::concat(" in ", shards, " shards, VIT_SHARDS=1 for one") : std::string(),
      ", optimizer ", format_bytes(optimizer), ", activations ", format_bytes(activations),
      ", eval activations ", format_bytes(eval_activations), ", batch buffers ", format_bytes(batches), ")");
}

MemoryPlan plan_training_memory(const ViTConfig& cfg, int64_t batch, const std::string& optimizer, int shards,
                                bool amp) {
  MemoryPlan p;
  const size_t n = size_t(ParamTable(cfg).total()) * sizeof(float);
  const int R = int(std::clamp<int64_t>(shards > 0 ? shards : num_threads(), 1, std::max<int64_t>(batch, 1)));
  p.params = n;
  p.shards = R;
  p.grads = n * size_t(R);
  p.optimizer = (optimizer == "sgd" || optimizer == "lion" ? 1 : 2) * n;
  p.activations = ViT::planned_activation_bytes(cfg, batch, true, R, amp);
  if (amp) p.activations += n / 2;  // the weights rounded to bf16 (the blocks' matrices, at most all)
  p.eval_activations = ViT::planned_activation_bytes(cfg, batch, false, R);
  // Two buffers (one filling while the other trains): images and int64 labels.
  p.batches =
      2 * size_t(batch) * (size_t(cfg.in_chans * cfg.img_h * cfg.img_w) * sizeof(float) + sizeof(int64_t));
  return p;
}

size_t available_memory_bytes() {
  if (const std::optional<size_t> limit = setting_bytes("VIT_MEMORY_LIMIT")) return *limit;
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

void check_memory(const MemoryPlan& plan, size_t available, const std::string& what) {
  VIT_CHECK(available == 0 || plan.total() <= available, what, " needs about ", plan.describe(),
            ", but only ", format_bytes(available), " is available (",
            setting("VIT_MEMORY_LIMIT") ? "VIT_MEMORY_LIMIT" : "MemAvailable in /proc/meminfo",
            "). Lower --batch-size or the model size, or pass --no-memory-check to try anyway");
}

}  // namespace vit
