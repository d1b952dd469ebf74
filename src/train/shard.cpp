#include "train/shard.h"

#include <algorithm>

namespace vit {

ShardPlan shard_epoch(const std::vector<int64_t>& order, int64_t batch, int rank, int ranks, bool partners) {
  const int64_t n = int64_t(order.size());
  ShardPlan p;
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t bs = std::min(batch, n - first);
    const Rows r = shard_rows(bs, rank, ranks);
    for (int64_t b = r.lo; b < r.hi; ++b) p.order.push_back(order[first + b]);
    if (partners)
      for (int64_t b = r.lo; b < r.hi; ++b) p.order.push_back(order[first + bs - 1 - b]);
    p.ends.push_back(int64_t(p.order.size()));
  }
  return p;
}

}  // namespace vit
