// The packed weights' layout, shared by linear_packed.cpp (packing, the plain product, the
// dispatch) and the vector kernels (avx512/ and avx2/linear_packed.cpp): panel p holds rows
// [kPanel p, kPanel p + w) of w[N,K] (w = kPanel, or the rows left at the end) transposed to
// [K, w]. Also the walk over a product both vector kernels take (for_each_packed_slice).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "vit/core/threads.h"

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

// One thread's piece of a packed product: panel p (columns [n0, n0 + w) of y) over the k
// chunk [k0, k0 + kc), for the row blocks of the thread's share.
struct PackedSlice {
  PanelSplit::Share share;
  int64_t k0, kc;
  int64_t p, n0, w;
};

// The walk of a product y[M,N] = x[M,K] w^T over packed weights, the same for every vector
// kernel: the threads split it (PanelSplit, row blocks of `rows`), and each takes its k chunks
// of `chunk` in order, its panels under each, calling slice(PackedSlice) for every one. Chunks
// in order keep each output one fma chain over k in order, whatever the thread count. A slice
// that inlines its instruction set's functions carries that set's attribute itself (a lambda
// does not take it from the function it is written in: avx512/linear_packed.cpp).
template <class Slice>
void for_each_packed_slice(int64_t M, int64_t K, int64_t N, int rows, int64_t chunk, const Slice& slice) {
  const PanelSplit split(M, N, rows, threads_for(M * N * K / 16));
#pragma omp parallel num_threads(split.threads)
  {
    PackedSlice s{split.share(omp_get_thread_num(), omp_get_num_threads()), 0, 0, 0, 0, 0};
    for (s.k0 = 0; s.k0 < K; s.k0 += chunk) {
      s.kc = std::min(chunk, K - s.k0);
      for (s.p = s.share.p0; s.p < s.share.p1; ++s.p) {
        s.n0 = s.p * kPanel, s.w = panel_width(N, s.n0);
        slice(s);
      }
    }
  }
}

}  // namespace vit::cpu
