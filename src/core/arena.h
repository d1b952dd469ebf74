// Arena: one aligned, zero-initialized float allocation. Parameters, gradients, optimizer
// moments and activations each live in one arena, so a pass over all of them is one loop
// and nothing is allocated inside a training step. Large arenas are mapped from the kernel,
// whose pages are zero and take memory only once touched: a model used for inference alone
// never pays for its gradient arena (ViT-B/16: 330 MiB).
#pragma once
#include <cstddef>
#include <memory>

namespace vit {

class Arena {
 public:
  Arena() = default;
  explicit Arena(size_t n) { resize(n); }
  // Reallocates (and zeroes) only when n exceeds the capacity; contents are not kept.
  void resize(size_t n);
  float* data() { return ptr_.get(); }
  const float* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  void zero();
  // Sets [offset, offset + n) to zero and gives the pages wholly inside it back to the kernel
  // (mapped arenas), so the range costs no memory until written again: for weights that
  // another copy has replaced (bf16 inference).
  void release(size_t offset, size_t n);

 private:
  struct Free {
    size_t mapped_bytes = 0;  // > 0: the block came from mmap
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> ptr_{nullptr, Free{}};
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace vit
