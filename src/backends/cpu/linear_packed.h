// The packed weights' layout, shared by linear_packed.cpp (packing, the plain product, the
// dispatch) and the vector kernels (avx512/linear_packed.cpp): panel p holds rows
// [kPanel p, kPanel p + w) of w[N,K] (w = kPanel, or the rows left at the end) transposed to
// [K, w].
#pragma once
#include <algorithm>
#include <cstdint>

namespace vit::cpu {

constexpr int64_t kPanel = 64;  // output columns per panel: 4 AVX-512 vectors

inline int64_t panel_width(int64_t N, int64_t n0) {
  return N - n0 < kPanel ? N - n0 : kPanel;
}

// How the vector kernels share a product of M rows (in blocks of `rows`) and N columns (in
// panels) over the threads: each thread takes a range of panels, or, where the panels do not
// share out evenly (a narrow layer: 3 panels on 2 threads; more than 1/8 over the average),
// every panel over a range of row blocks. Thread t of `threads` gets panels [p0, p1) and row
// blocks [r0, r1).
struct PanelSplit {
  int threads;
  int64_t panels, blocks;
  bool by_panels;
  PanelSplit(int64_t M, int64_t N, int64_t rows, int nt) {
    panels = (N + kPanel - 1) / kPanel, blocks = (M + rows - 1) / rows;
    threads = int(std::min<int64_t>(nt, std::max(panels, blocks)));
    by_panels = panels >= threads && (panels + threads - 1) / threads * threads * 8 <= panels * 9;
  }
  struct Share {
    int64_t p0, p1, r0, r1;
  };
  Share share(int t, int T) const {
    if (by_panels) return {panels * t / T, panels * (t + 1) / T, 0, blocks};
    return {0, panels, blocks * t / T, blocks * (t + 1) / T};
  }
};

}  // namespace vit::cpu
