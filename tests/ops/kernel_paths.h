// The kernel tables (backends/cpu/kernel_set.h) the tests compare with the generic one.
#pragma once
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernel_set.h"

namespace vit::cpu {

// The tables of every path this CPU runs other than generic, with their names.
inline std::vector<std::pair<std::string, CpuKernels>> vector_paths() {
  std::vector<std::pair<std::string, CpuKernels>> v;
  for (Isa i : {Isa::avx2, Isa::avx512, Isa::neon})
    if (isa_supported(i)) v.emplace_back(isa_name(i), kernels_for(i));
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

}  // namespace vit::cpu
