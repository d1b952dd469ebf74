#include "vit/core/arena.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace vit {

void Arena::Free::operator()(float* p) const {
  std::free(p);
}

void Arena::resize(size_t n) {
  if (n > capacity_) {
    // 64-byte alignment: one cache line, one AVX-512 register.
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    ptr_.reset(static_cast<float*>(p));
    capacity_ = n;
  }
  size_ = n;
}

void Arena::zero() {
  if (size_) std::memset(ptr_.get(), 0, size_ * sizeof(float));
}

}  // namespace vit
