// Inference linear on weights packed in place: y = x w^T + b for few rows (batch-1 ViTs:
// 197 token rows). oneDNN's sgemm repacks w at every call and splits small products poorly
// over two threads; here w is packed once, in the memory it occupies (no second copy), into
// panels: panel p holds rows [64p, 64p + w) of w[N,K] (w = 64, or the rows left at the end)
// transposed to [K, w], or on AVX2 to four 16-column slices [K, 16] (linear_packed.h,
// packed_slice()). Each path's kernel (avx512/, avx2/, neon/ linear_packed.cpp) multiplies a
// few rows of x by one panel over k chunks, reading x's rows where they are, and pulls the
// next panel's weights into L2 while it computes. Every output is one fma chain over k in
// order by one thread, whatever the thread count. docs/design.md ("fp32 inference at small
// batches") has the measurements. This file packs, calls the kernel table's entry, and holds
// the plain loops of the generic table.

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "backends/cpu/linear_packed.h"
#include "core/settings.h"
#include "core/threads.h"

namespace vit::cpu {

int64_t packed_slice() {
  return kernels().packed_slice;
}

bool packed_linear_preferred(int64_t M) {
  if (const std::string_view env = setting_choice("VIT_PACK"); !env.empty()) return env == "on";
  // Ahead of oneDNN's sgemm up to the path's packed_max_rows (AVX-512 and AVX2, each measured
  // on whole models: docs/history/benchmarks-2026-11.md); NEON is not measured, so never.
  return M <= kernels().packed_max_rows;
}

namespace {
// Each 64-row block of w[N,K] transposed to column slices [K, s] (to_panels) or back, in
// place: the panels shared over the threads, each through a per-thread copy and the path's
// blocked transpose (head_transpose): the one-off cost before the first image stays small
// (docs/design.md, "fp32 inference at small batches").
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
  if (K == 0) return linear_forward_packed_reference(y, x, wp, b, M, K, N, gelu);  // y is the bias
  kernels().linear_forward_packed(y, x, wp, b, M, K, N, gelu);
}

// The plain loops (k in order, as the vector kernels) on the layout of the path in use: the
// generic table's entry (VIT_ISA=generic with VIT_PACK=on).
void linear_forward_packed_reference(float* y, const float* x, const float* wp, const float* b, int64_t M,
                                     int64_t K, int64_t N, bool gelu) {
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
  if (gelu) gelu_forward(y, y, M * N);  // a pass over y
}

}  // namespace vit::cpu
