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

int64_t repeated_epoch_size(int64_t n) {
  return n / 256 * 256;
}

std::vector<int64_t> repeated_epoch_order(int64_t n, int64_t repeats, uint64_t seed, int64_t epoch) {
  const std::vector<int64_t> images = epoch_order(n, seed, epoch);
  std::vector<int64_t> order;
  order.reserve(size_t(repeated_epoch_size(n)));
  for (size_t i = 0; int64_t(order.size()) < repeated_epoch_size(n); ++i)
    for (int64_t k = 0; k < repeats && int64_t(order.size()) < repeated_epoch_size(n); ++k)
      order.push_back(images[i] + k * n);
  return order;
}

}  // namespace vit
