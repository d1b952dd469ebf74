// The packed weights' layout, shared by linear_packed.cpp (packing, the plain product, the
// dispatch) and the vector kernels (avx512/, avx2/ and neon/linear_packed.cpp): panel p holds
// rows [kPanel p, kPanel p + w) of w[N,K] (w = kPanel, or the rows left at the end), in
// column slices of S = packed_slice() columns, each transposed to [K, s] (s = S, or the
// columns left at the panel's end) and stored one after the other. S is the path's: a whole
// panel (one [K, w] block) on AVX-512, NEON and the plain loops; 16 columns on AVX2, its
// register block's width, so that the kernel's weights come as one contiguous stream (see
// avx2/linear_packed.cpp for the measurements). Also the walk over a product's slices in order
// (PackedWalk), the slices handed out as threads ask (SliceQueue), the threaded loop over them
// every vector kernel runs (for_each_slice), and the whole product of the kernels that take
// panels in column slices (slices_forward).
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/threads.h"

namespace vit::cpu {

constexpr int64_t kPanel = 64;  // output columns per panel: 4 AVX-512 vectors

inline int64_t panel_width(int64_t N, int64_t n0) {
  return N - n0 < kPanel ? N - n0 : kPanel;
}

// The columns per stored slice of a panel on the path in use (the kernel table's, chosen once
// per process, so the weights are packed and read with the same S): kPanel, or kPackedSlice on
// AVX2.
namespace avx2 {
constexpr int64_t kPackedSlice = 16;
// Up to this many rows (batch 4 at 197 tokens) the packed product is ahead of oneDNN's sgemm on
// the AVX-512 and AVX2 paths (packed_linear_preferred; docs/benchmarks.md).
constexpr int64_t kPackedMaxRows = 800;
}  // namespace avx2
int64_t packed_slice();

// Where columns [c, ...) of a panel of width w at packed weights P (its first float, n0 K
// into wp) start at row k, and the leading dimension there: inside the slice of S columns
// holding column c (the register blocks never cross a slice: S is a multiple of their width).
struct SliceColumns {
  const float* B;
  int64_t ld;
};
inline SliceColumns slice_columns(const float* P, int64_t K, int64_t w, int64_t S, int64_t c, int64_t k) {
  const int64_t c0 = c / S * S, s = w - c0 < S ? w - c0 : S;
  return {P + c0 * K + k * s + (c - c0), s};
}

// A product of M rows (in blocks of `rows`) and N columns (in panels) for at most nt threads:
// no more threads than panels or row blocks (for_each_slice hands the slices out). A share is
// panels [p0, p1) over row blocks [r0, r1): whole() on one thread, one panel over a part of
// the row blocks for each slice of a SliceQueue.
struct PanelSplit {
  int threads;
  int64_t panels, blocks;
  PanelSplit(int64_t M, int64_t N, int64_t rows, int nt) {
    panels = (N + kPanel - 1) / kPanel, blocks = (M + rows - 1) / rows;
    threads = int(std::min<int64_t>(nt, std::max(panels, blocks)));
  }
  struct Share {
    int64_t p0, p1, r0, r1;
  };
  Share whole() const { return {0, panels, 0, blocks}; }
};

// A piece of a packed product run by one thread: panel p (columns [n0, n0 + w) of y) over the
// k chunk [k0, k0 + kc), for the row blocks of the share.
struct PackedSlice {
  PanelSplit::Share share;
  int64_t k0, kc;
  int64_t p, n0, w;
};

// The slices of a share in the order one thread takes them (and SliceQueue hands them out): its
// k chunks of `chunk` in order, its panels under each (chunks in order keep each output one fma
// chain over k in order, whatever the thread count):
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
  // panel, or the next chunk of the share's first panel), stored in column slices of S
  // (packed_slice()): one contiguous piece [kc][w] when S = kPanel, else one [kc][s] per
  // slice. The kernels pull them towards L2 while this slice runs: they come from memory
  // once per call. No pieces after the last slice.
  static constexpr int kMaxPieces = 4;  // slices per panel: S >= 16 (slices_forward checks)
  struct Pieces {
    const float* start[kMaxPieces] = {};
    int64_t floats[kMaxPieces] = {};
    int n = 0;
  };
  Pieces next_weights(const float* wp, int64_t S) const {
    const PackedSlice& s = slice;
    if (s.p + 1 < s.share.p1) return weights(wp, K, N, S, s.n0 + kPanel, s.k0, s.kc);
    if (s.k0 + s.kc < K)
      return weights(wp, K, N, S, s.share.p0 * kPanel, s.k0 + s.kc, std::min(chunk, K - s.k0 - s.kc));
    return {};
  }
  // The weights of the slice of panel columns [n0, ...) over k chunk [k0, k0 + kc).
  static Pieces weights(const float* wp, int64_t K, int64_t N, int64_t S, int64_t n0, int64_t k0,
                        int64_t kc) {
    Pieces out;
    const int64_t w = panel_width(N, n0);
    for (int64_t c0 = 0; c0 < w; c0 += S, ++out.n) {
      const SliceColumns at = slice_columns(wp + n0 * K, K, w, S, c0, k0);
      out.start[out.n] = at.B, out.floats[out.n] = kc * at.ld;
    }
    return out;
  }
  // The same as 64-byte cache lines to prefetch: line(i) for i in [0, lines).
  struct Lines {
    Pieces pieces;
    int64_t lines = 0;
    const char* line(int64_t i) const {
      int j = 0;
      for (int64_t in_piece; i >= (in_piece = (pieces.floats[j] + 15) / 16); ++j) i -= in_piece;
      return reinterpret_cast<const char*>(pieces.start[j]) + 64 * i;
    }
  };
  Lines next_slice_lines(const float* wp, int64_t S) const { return lines(next_weights(wp, S)); }
  static Lines lines(const Pieces& pieces) {
    Lines out{pieces};
    for (int j = 0; j < out.pieces.n; ++j) out.lines += (out.pieces.floats[j] + 15) / 16;
    return out;
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

// A product's slices handed out as the threads ask, not as fixed shares: two threads finish
// together even when one of them runs slower (another tenant on its core). A slice here is a
// k chunk of one panel over one of `parts` ranges of the row blocks (parts > 1 where the
// panels are few: 3 on 2 threads). The slices go out from one shared counter in PackedWalk's
// order (k chunks in order; every panel under each, and each panel's row parts under it); a
// thread takes the slice after the one it runs as it starts it (so that it can pull that
// slice's weights towards its L2, as PackedWalk does), and waits, if it has to, until the same
// panel and rows' previous chunk is done: every output stays one fma chain over k in order, so
// the bits do not depend on who ran what. It never waits on a slice no thread runs: the lowest
// slice not done is always one a thread runs, and its previous chunk is done.
class SliceQueue {
 public:
  SliceQueue(int64_t K, int64_t N, int64_t chunk, int64_t blocks, int64_t parts)
      : K_(K),
        N_(N),
        chunk_(chunk),
        blocks_(blocks),
        parts_(parts),
        columns_((N + kPanel - 1) / kPanel * parts),
        slices_(columns_ * ((K + chunk - 1) / chunk)),
        chunks_done_(size_t(columns_)) {}
  int64_t slices() const { return slices_; }
  int64_t take() { return taken_.fetch_add(1, std::memory_order_relaxed); }
  // Slice i (i < slices()): chunk i / columns over column i % columns, which is panel
  // column / parts, row part column % parts.
  PackedSlice slice(int64_t i) const {
    const int64_t column = i % columns_, p = column / parts_, part = column % parts_,
                  k0 = i / columns_ * chunk_;
    return {{p, p + 1, blocks_ * part / parts_, blocks_ * (part + 1) / parts_},
            k0,
            std::min(chunk_, K_ - k0),
            p,
            p * kPanel,
            panel_width(N_, p * kPanel)};
  }
  PackedWalk::Pieces weights(const float* wp, int64_t S, int64_t i) const {
    if (i >= slices_) return {};
    const PackedSlice s = slice(i);
    return PackedWalk::weights(wp, K_, N_, S, s.n0, s.k0, s.kc);
  }
  void wait_for_previous_chunk(int64_t i) const {
    while (chunks_done_[size_t(i % columns_)].load(std::memory_order_acquire) < i / columns_)
      std::this_thread::yield();
  }
  void done(int64_t i) {
    chunks_done_[size_t(i % columns_)].store(i / columns_ + 1, std::memory_order_release);
  }

 private:
  int64_t K_, N_, chunk_, blocks_, parts_, columns_, slices_;
  std::atomic<int64_t> taken_{0};
  std::vector<std::atomic<int64_t>> chunks_done_;  // per panel and row part: its k chunks done
};

// One thread's walk over a SliceQueue, in PackedWalk's form:
//   for (QueueWalk it(queue); it.more(); it.next()) { const PackedSlice& s = it.slice; ... }
struct QueueWalk {
  SliceQueue& queue;
  int64_t at, after;  // the slice this thread runs, and the one it took after it
  PackedSlice slice{};
  explicit QueueWalk(SliceQueue& q) : queue(q), at(q.take()), after(q.take()) { start(); }
  bool more() const { return at < queue.slices(); }
  PackedWalk::Lines next_slice_lines(const float* wp, int64_t S) const {
    return PackedWalk::lines(queue.weights(wp, S, after));
  }
  void next() {
    queue.done(at);
    at = after, after = queue.take();
    start();
  }

 private:
  void start() {
    if (!more()) return;
    slice = queue.slice(at);
    queue.wait_for_previous_chunk(at);
  }
};

// Calls run(slice, next) for every slice (k chunk of `chunk`, panel, row blocks of `rows`) of a
// product of M rows, N columns and K > 0, next being the cache lines of the weights (packed
// weights wp, stored in slices of S columns) of the slice the same thread runs after it. On
// more than one thread the slices go out as the threads ask (SliceQueue), split over the row
// blocks too where the panels are fewer than two per thread; on one thread in PackedWalk's
// order. run is called on every thread of the parallel region: a kernel's own body belongs in
// functions with its instruction set's attribute (or a lambda given it).
template <typename Run>
void for_each_slice(int64_t M, int64_t K, int64_t N, int64_t rows, int64_t chunk, const float* wp, int64_t S,
                    Run&& run) {
  const PanelSplit split(M, N, rows, threads_for(M * N * K / 16));
  if (split.threads > 1) {
    const int64_t parts =
        std::clamp<int64_t>((2 * split.threads + split.panels - 1) / split.panels, 1, split.blocks);
    SliceQueue queue(K, N, chunk, split.blocks, parts);
#pragma omp parallel num_threads(split.threads)
    for (QueueWalk it(queue); it.more(); it.next()) run(it.slice, it.next_slice_lines(wp, S));
  } else {
    for (PackedWalk it(split.whole(), K, N, chunk); it.more(); it.next())
      run(it.slice, it.next_slice_lines(wp, S));
  }
}

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
// neon/linear_packed.cpp): the threads take slices (k chunks of Chunk of a panel) as they ask
// (SliceQueue; one thread walks them all in order, PackedWalk). block<R>(x, ldx, B, ldb, n,
// kc, first, last_gelu, bias, c, ldc) is the path's register block: R rows of x (leading dim
// ldx) times columns [0, n)
// (n <= Cols) of panel rows B (leading dim ldb) over kc values of k into c (leading dim ldc),
// from the bias (or 0) when first, else adding onto what c holds; GELU applied to the sums
// before they are stored when last_gelu (given on the last k chunk when gelu).
// RowsOuter: each row block passes over the panel's Cols-column slices, so that its Rows rows
// of x stay in L1 while the slices come from L2 (where a slice over a chunk does not fit L1
// beside them); else each slice passes over the row blocks, staying in L1 itself while x's
// rows come from L2.
template <int64_t Rows, int64_t Cols, int64_t Chunk, bool RowsOuter, int64_t Slice, typename Block>
void slices_forward(Block&& block, float* y, const float* x, const float* wp, const float* b, int64_t M,
                    int64_t K, int64_t N, bool gelu) {
  static_assert(Slice % Cols == 0 && kPanel % Slice == 0, "a register block within one stored slice");
  static_assert(kPanel / Slice <= PackedWalk::kMaxPieces, "a panel's slices fit PackedWalk::Pieces");
  auto run = [&](const PackedSlice& s, const PackedWalk::Lines& next) {
    const float* P = wp + s.n0 * K;  // panel p
    // The next slice's weights towards L2, in even shares before each register block.
    const int64_t calls = (s.w + Cols - 1) / Cols * (s.share.r1 - s.share.r0);
    const int64_t per_call = (next.lines + calls - 1) / std::max<int64_t>(calls, 1);
    const bool last_gelu = gelu && s.k0 + s.kc == K;
    int64_t done = 0;
    auto one = [&](int64_t j0, int64_t rb) {
      for (const int64_t end = std::min(next.lines, done + per_call); done < end; ++done)
        __builtin_prefetch(next.line(done), 0, 2);
      const SliceColumns B = slice_columns(P, K, s.w, Slice, j0, s.k0);
      with_rows<Rows>(block, std::min(Rows, M - rb * Rows), x + rb * Rows * K + s.k0, K, B.B, B.ld,
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
  };
  for_each_slice(M, K, N, Rows, Chunk, wp, Slice, run);
}

}  // namespace vit::cpu
