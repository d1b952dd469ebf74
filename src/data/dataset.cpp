#include "data/dataset.h"

#include <numeric>
#include <utility>

#include "core/rng.h"

namespace vit {

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(mix64(seed ^ 0x5EED0000ull) + uint64_t(epoch));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(uint64_t(i) + 1)]);
  return order;
}

}  // namespace vit
