// Inference linear on weights packed in place: y = x w^T + b for few rows (batch-1 ViTs:
// 197 token rows). oneDNN's sgemm repacks w at every call and splits small products poorly
// over two threads; here w is packed once, in the memory it occupies (no second copy), into
// panels: panel p holds rows [64p, 64p + w) of w[N,K] (w = 64, or the rows left at the end)
// transposed to [K, w], or on AVX2 to four 16-column slices [K, 16] (linear_packed.h,
// packed_slice()). An AVX-512 kernel of our own
// (avx512/linear_packed.cpp) multiplies 6 rows of x by one panel (6 x 64 outputs in 24
// registers) over k chunks of 768, reading x's rows where they are, and pulls the next
// panel's weights into L2 while it computes (they come from memory once per call). Every
// output is one fma chain over k in order by one thread, whatever the thread count. On the
// Intel Xeon of 2026-11-25 it ran ViT-B/16 at batch 1 1.10x faster than oneDNN's matmul
// primitive on its own blocked layout (docs/history/benchmarks-2026-11.md). This file packs, dispatches on
// isa(), and holds the plain loops for the other paths.

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/linear_packed.h"
#include "backends/cpu/neon/kernels.h"
#include "core/settings.h"
#include "core/threads.h"

namespace vit::cpu {

namespace {
constexpr int64_t kPreferredRows = 800;  // AVX-512 and AVX2, each measured; see packed_linear_preferred

// The same products in plain loops (k in order, as the vector kernels), on the layout of the
// path in use: where no vector kernel runs (VIT_ISA=generic with VIT_PACK=on).
void forward_plain(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                   int64_t N) {
  const int64_t S = packed_slice();
#pragma omp parallel for num_threads(threads_for(M* N* K / 16)) schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n0 = 0; n0 < N; n0 += kPanel) {
      const int64_t w = panel_width(N, n0);
      for (int64_t j = 0; j < w; ++j) {
        const SliceColumns col = slice_columns(wp + n0 * K, K, w, S, j, 0);
        float s = b ? b[n0 + j] : 0.f;
        for (int64_t k = 0; k < K; ++k) s += x[i * K + k] * col.B[k * col.ld];
        y[i * N + n0 + j] = s;
      }
    }
}
}  // namespace

int64_t packed_slice() {
  return isa() == Isa::avx2 ? avx2::kPackedSlice : kPanel;
}

bool packed_linear_preferred(int64_t M) {
  if (const std::string_view env = setting_choice("VIT_PACK"); !env.empty()) return env == "on";
  // Measured on whole models (docs/history/benchmarks-2026-11.md): ahead of oneDNN's sgemm up to about 800
  // rows (batch 4 at 197 tokens) on two threads and on one, on an AMD Zen 5 (16-wide panels:
  // ViT-B/16 at batch 1 1.29x on 2 threads) and on an Intel Xeon (oneDNN's blocked layout
  // until 2026-11-25: 1.11x at batch 1, 1.06x at 4); level at batch 16 (3152 rows, 1.006x
  // with the 64-wide panels), where the batch is split into lanes on sgemm instead. On the
  // AVX2 path (Zen 5 held to AVX2, oneDNN too; 2026-11-26, with the next slice's weights
  // prefetched): ahead up to about 800 rows too (on two threads ViT-B/16 at 2 and 4 images
  // 1.029x and 1.071x, ViT-S at 4 1.027x, ViT-Ti at 2 and 4 1.017x and 1.007x, cifar-seed at 8
  // 1.025x; on one, ViT-Ti at 4 1.053x, ViT-S at 2 1.057x), level to slightly behind above
  // (ViT-Ti at 8, 1576 rows, 0.988x; cifar-seed at 12 and 16, 780 and 1040 rows, 0.993x and
  // 0.984x). NEON: not measured (no arm64 machine).
  switch (isa()) {
    case Isa::avx512:
    case Isa::avx2: return M <= kPreferredRows;
    default: return false;
  }
}

namespace {
// Each 64-row block of w[N,K] transposed to column slices [K, s] (to_panels) or back, in
// place: the panels shared over the threads, each through a per-thread copy and the path's
// blocked transpose (head_transpose). Packing ViT-B/16's 48 block weights on the Intel Xeon took 191
// ms in one thread's plain loop, 21 ms so (27-34 on the AVX2 path; one thread 40-50 ms): the
// one-off cost before the first image, which had made `vit predict -b 1` on one image 0.52 s
// against 0.37 unpacked, and is now within that command's noise.
void transpose_panels(float* w, int64_t N, int64_t K, bool to_panels) {
  if (K == 0) return;  // nothing to move (and the copy's scratch would be null)
  const int64_t panels = (N + kPanel - 1) / kPanel;
  for_items(panels, threads_for(N * K), [&](int64_t p) {
    thread_local Scratch<float> buf;
    float* tmp = grown(buf, kPanel * K);
    const int64_t n0 = p * kPanel, pw = panel_width(N, n0), S = packed_slice();
    float* blk = w + n0 * K;
    for (int64_t c0 = 0; c0 < pw; c0 += S) {  // rows [c0, c0 + s) of the panel: one slice
      const int64_t s = std::min(S, pw - c0);
      if (to_panels)
        head_transpose(tmp + c0 * K, s, blk + c0 * K, K, s, K);  // [s, K] -> [K, s]
      else
        head_transpose(tmp + c0 * K, K, blk + c0 * K, s, K, s);  // [K, s] -> [s, K]
    }
    std::memcpy(blk, tmp, size_t(pw * K) * sizeof(float));
  });
}
}  // namespace

void pack_linear_weights(float* w, int64_t N, int64_t K) {
  transpose_panels(w, N, K, true);
}

void unpack_linear_weights(float* w, int64_t N, int64_t K) {
  transpose_panels(w, N, K, false);
}

void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu) {
  if (M == 0 || N == 0) return;
  switch (K > 0 ? isa() : Isa::generic) {  // (K = 0: y is the bias)
#if VIT_ISA_X86
    case Isa::avx512: return avx512::linear_forward_packed(y, x, wp, b, M, K, N, gelu);
    case Isa::avx2: return avx2::linear_forward_packed(y, x, wp, b, M, K, N, gelu);
#endif
#if VIT_ISA_NEON
    case Isa::neon: return neon::linear_forward_packed(y, x, wp, b, M, K, N, gelu);
#endif
    default: forward_plain(y, x, wp, b, M, K, N);
  }
  if (gelu) gelu_forward(y, y, M * N);  // the plain loops' GELU: a pass over y
}

}  // namespace vit::cpu
