// The packed weights' layout, shared by linear_packed.cpp (packing, the plain product, the
// dispatch) and the vector kernels (avx512/linear_packed.cpp): panel p holds rows
// [kPanel p, kPanel p + w) of w[N,K] (w = kPanel, or the rows left at the end) transposed to
// [K, w].
#pragma once
#include <cstdint>

namespace vit::cpu {

constexpr int64_t kPanel = 64;  // output columns per panel: 4 AVX-512 vectors

inline int64_t panel_width(int64_t N, int64_t n0) {
  return N - n0 < kPanel ? N - n0 : kPanel;
}

}  // namespace vit::cpu
