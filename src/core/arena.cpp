#include "vit/core/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace vit {

void Arena::Free::operator()(float* p) const {
  if (mapped_bytes)
    munmap(p, mapped_bytes);
  else
    std::free(p);
}

namespace {
// From this size on, blocks come from mmap: page-aligned and zero without a memset.
constexpr size_t kMapBytes = size_t(1) << 20;
}  // namespace

void Arena::resize(size_t n) {
  if (n > capacity_) {
    // 64-byte alignment: one cache line, one AVX-512 register.
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    ptr_.reset();  // free the old block before taking the new one
    if (bytes >= kMapBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      ptr_ = std::unique_ptr<float, Free>(static_cast<float*>(p), Free{bytes});
    } else {
      void* p = std::aligned_alloc(64, bytes ? bytes : 64);
      if (!p) throw std::bad_alloc();
      std::memset(p, 0, bytes);
      ptr_ = std::unique_ptr<float, Free>(static_cast<float*>(p), Free{0});
    }
    capacity_ = n;
  }
  size_ = n;
}

void Arena::zero() {
  if (size_) std::memset(ptr_.get(), 0, size_ * sizeof(float));
}

void Arena::release(size_t offset, size_t n) {
  if (offset >= size_) return;
  n = std::min(n, size_ - offset);
  char* lo = reinterpret_cast<char*>(ptr_.get() + offset);
  char* hi = lo + n * sizeof(float);
  if (ptr_.get_deleter().mapped_bytes) {
    const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
    char* p0 = reinterpret_cast<char*>((uintptr_t(lo) + page - 1) / page * page);
    char* p1 = reinterpret_cast<char*>(uintptr_t(hi) / page * page);
    if (p0 < p1 && madvise(p0, size_t(p1 - p0), MADV_DONTNEED) == 0) {  // the pages read as zero now
      std::memset(lo, 0, size_t(p0 - lo));
      std::memset(p1, 0, size_t(hi - p1));
      return;
    }
  }
  std::memset(lo, 0, size_t(hi - lo));
}

}  // namespace vit
