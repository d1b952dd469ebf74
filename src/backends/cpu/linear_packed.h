// The packed weights' layout, shared by linear_packed.cpp (packing, the plain product, the
// dispatch) and the vector kernels (avx512/, avx2/ and neon/linear_packed.cpp): panel p holds
// rows [kPanel p, kPanel p + w) of w[N,K] (w = kPanel, or the rows left at the end) transposed
// to [K, w]. Also the walk over a product every vector kernel takes (PackedWalk), and the
// whole threaded product of the kernels that take panels in column slices (slices_forward).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

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

// The slices of one thread's share in the order every vector kernel takes them: its k chunks
// of `chunk` in order, its panels under each (chunks in order keep each output one fma chain
// over k in order, whatever the thread count). A loop, not a function taking the kernel, so
// that the kernel's body stays in its own function with its instruction set's attribute:
//   for (PackedWalk it(share, K, N, chunk); it.more(); it.next()) { const PackedSlice& s = it.slice; ... }
struct PackedWalk {
  PackedSlice slice;
  int64_t K, N, chunk;
  PackedWalk(const PanelSplit::Share& share, int64_t K_, int64_t N_, int64_t chunk_)
      : slice{share, 0, std::min(chunk_, K_), share.p0, 0, 0}, K(K_), N(N_), chunk(chunk_) {
    set_panel();
  }
  bool more() const { return slice.k0 < K && slice.share.p0 < slice.share.p1; }
  // The weights of the slice after this one in packed weights wp (this chunk of the next
  // panel, or the next chunk of the share's first panel: contiguous floats, [kc][w]), as where
  // they start and how many floats they are; {nullptr, 0} after the last. The kernels pull
  // them towards L2 while this slice runs: they come from memory once per call.
  std::pair<const float*, int64_t> next_weights(const float* wp) const {
    const PackedSlice& s = slice;
    if (s.p + 1 < s.share.p1) {
      const int64_t wn = panel_width(N, s.n0 + kPanel);
      return {wp + (s.n0 + s.w) * K + s.k0 * wn, s.kc * wn};
    }
    if (s.k0 + s.kc < K) {
      const int64_t wn = panel_width(N, s.share.p0 * kPanel);
      return {wp + s.share.p0 * kPanel * K + (s.k0 + s.kc) * wn, std::min(chunk, K - s.k0 - s.kc) * wn};
    }
    return {nullptr, 0};
  }
  // The same as 64-byte cache lines to prefetch: where they start and how many.
  std::pair<const char*, int64_t> next_weight_lines(const float* wp) const {
    const auto [next, floats] = next_weights(wp);
    return {reinterpret_cast<const char*>(next), (floats + 15) / 16};
  }
  void next() {
    if (++slice.p == slice.share.p1) {
      slice.p = slice.share.p0, slice.k0 += chunk;
      slice.kc = std::min(chunk, K - slice.k0);
    }
    set_panel();
  }

 private:
  void set_panel() { slice.n0 = slice.p * kPanel, slice.w = panel_width(N, slice.n0); }
};

// Calls block.operator()<R>(args...) for R = rows (1 <= rows <= Rows): a row count known at run
// time to the register block made for it.
template <int64_t Rows, typename Block, typename... Args>
void with_rows(Block& block, int64_t rows, Args... args) {
  if constexpr (Rows > 1)
    if (rows < Rows) return with_rows<Rows - 1>(block, rows, args...);
  block.template operator()<int(Rows)>(args...);
}

// y[M,N] = x[M,K] wp^T + b (b may be null; K > 0), GELU applied when gelu, by a kernel of
// register blocks of Rows rows of x times Cols columns of a panel (avx2/ and
// neon/linear_packed.cpp): the threads share the panels or the row blocks (PanelSplit) and walk
// their slices (PackedWalk), k chunks of Chunk. block<R>(x, ldx, B, ldb, n, kc, first, last_gelu,
// bias, c, ldc) is the path's register block: R rows of x (leading dim ldx) times columns [0, n)
// (n <= Cols) of panel rows B (leading dim ldb) over kc values of k into c (leading dim ldc),
// from the bias (or 0) when first, else adding onto what c holds; GELU applied to the sums
// before they are stored when last_gelu (given on the last k chunk when gelu).
// RowsOuter: each row block passes over the panel's Cols-column slices, so that its Rows rows
// of x stay in L1 while the slices come from L2 (where a slice over a chunk does not fit L1
// beside them); else each slice passes over the row blocks, staying in L1 itself while x's
// rows come from L2.
template <int64_t Rows, int64_t Cols, int64_t Chunk, bool RowsOuter, typename Block>
void slices_forward(Block&& block, float* y, const float* x, const float* wp, const float* b, int64_t M,
                    int64_t K, int64_t N, bool gelu) {
  const PanelSplit split(M, N, Rows, threads_for(M * N * K / 16));
#pragma omp parallel num_threads(split.threads)
  for (PackedWalk it(split.share(omp_get_thread_num(), omp_get_num_threads()), K, N, Chunk); it.more();
       it.next()) {
    const PackedSlice& s = it.slice;
    const float* P = wp + s.n0 * K + s.k0 * s.w;  // panel p's rows [k0, k0 + kc): [kc][w]
    // The next slice's weights towards L2, in even shares before each register block.
    // (Plain names, not a structured binding: clang 14, the fuzz build's, cannot capture one.)
    const std::pair<const char*, int64_t> next_lines = it.next_weight_lines(wp);
    const char* next = next_lines.first;
    const int64_t lines = next_lines.second;
    const int64_t calls = (s.w + Cols - 1) / Cols * (s.share.r1 - s.share.r0);
    const int64_t per_call = (lines + calls - 1) / std::max<int64_t>(calls, 1);
    const bool last_gelu = gelu && s.k0 + s.kc == K;
    int64_t done = 0;
    auto one = [&](int64_t j0, int64_t rb) {
      for (const int64_t end = std::min(lines, done + per_call); done < end; ++done)
        __builtin_prefetch(next + 64 * done, 0, 2);
      with_rows<Rows>(block, std::min(Rows, M - rb * Rows), x + rb * Rows * K + s.k0, K, P + j0, s.w,
                      std::min(Cols, s.w - j0), s.kc, s.k0 == 0, last_gelu, b ? b + s.n0 + j0 : nullptr,
                      y + rb * Rows * N + s.n0 + j0, N);
    };
    if constexpr (RowsOuter) {
      for (int64_t rb = s.share.r0; rb < s.share.r1; ++rb)
        for (int64_t j0 = 0; j0 < s.w; j0 += Cols) one(j0, rb);
    } else {
      for (int64_t j0 = 0; j0 < s.w; j0 += Cols)
        for (int64_t rb = s.share.r0; rb < s.share.r1; ++rb) one(j0, rb);
    }
  }
}

}  // namespace vit::cpu
