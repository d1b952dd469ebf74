// std::vector storage on 64-byte boundaries, as the model's arenas give its tensors: a
// plain std::vector of floats starts 16 bytes into a cache line here (glibc), which cost
// oneDNN's matmul on packed weights 10-15% in these benchmarks (ViT-B/16's batch-1 products:
// 314-355 against 388-405 GFLOP/s) and sgemm 2-4%.
#pragma once
#include <cstdlib>
#include <new>
#include <vector>

namespace vit::bench {

template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(std::size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};

using Floats = std::vector<float, Aligned64<float>>;

}  // namespace vit::bench
