#include "core/arena.h"

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
// From this size on, mapped blocks start on a 2 MiB boundary and ask for transparent huge
// pages (the kernel gives them only on request: THP "madvise" mode). A training batch's
// activations are gigabytes in 4 KiB pages: the first step took 860 thousand page faults
// (cifar-seed, batch 256) and every step walked the page tables for strided reads
// (attention's heads read 64 bytes from each row of qkv).
constexpr size_t kHugePage = size_t(2) << 20;

// An anonymous mapping of `bytes`, 2 MiB-aligned when that large; nullptr when none is given.
void* map_block(size_t bytes) {
  if (bytes < kHugePage) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // Map one huge page more, then unmap what lies before the boundary and after the block.
  void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  char* lo = static_cast<char*>(raw);
  char* p = reinterpret_cast<char*>((uintptr_t(lo) + kHugePage - 1) / kHugePage * kHugePage);
  if (p > lo) munmap(lo, size_t(p - lo));
  if (char* end = lo + bytes + kHugePage; end > p + bytes) munmap(p + bytes, size_t(end - (p + bytes)));
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: 4 KiB pages when the kernel has no huge ones
  return p;
}
}  // namespace

void Arena::resize(size_t n) {
  if (n > capacity_) {
    // 64-byte alignment: one cache line, one AVX-512 register.
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    ptr_.reset();  // free the old block before taking the new one
    if (bytes >= kMapBytes) {
      void* p = map_block(bytes);
      if (!p) throw std::bad_alloc();
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
