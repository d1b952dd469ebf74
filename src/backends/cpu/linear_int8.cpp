// int8 inference linear (int8.h): weights quantized and packed once; at each call the kernel
// table's quantize_row_s8 on the activations, then per tile of rows x 64 output channels its
// gemm_s8 and the fp32 epilogue dequant_s8 (rounded as written, no fused multiply-add), so
// the outputs have the same bits on every path and thread count.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu.h"
#include "backends/cpu/int8.h"
#include "backends/cpu/kernel_set.h"
#include "core/check.h"
#include "core/threads.h"

namespace vit::cpu {

namespace {
constexpr int64_t kRowTile = 48;   // rows per tile (a multiple of every kernel's row block)
constexpr int64_t kBlockTile = 4;  // 16-channel blocks per tile: 64 outputs
}  // namespace

void quantize_weights_s8(int8_t* q, float* scale, const float* w, int64_t N, int64_t K) {
  for_items(N, threads_for(N * K), [&](int64_t n) {
    scale[n] = quantize_row_s8_reference(q + n * K, w + n * K, K, K);
    VIT_CHECK(std::isfinite(scale[n]), "int8: weight row ", n, " holds a NaN or infinity");
  });
}

std::shared_ptr<Int8Weights> pack_int8(const int8_t* q, const float* scale, int64_t N, int64_t K) {
  VIT_CHECK(N > 0 && K > 0 && K <= kS8MaxK, "int8: a [", N, ", ", K,
            "] weight is outside the int8 products' ", "range (K at most ", kS8MaxK, ")");
  auto p = std::make_shared<Int8Weights>();
  p->N = N, p->K = K;
  p->Kp = (K + kS8Group - 1) / kS8Group * kS8Group;
  p->blocks = (N + kS8Block - 1) / kS8Block;
  p->q.assign(size_t(p->blocks * p->Kp * kS8Block), 0);
  p->scale.assign(scale, scale + N);
  p->sum.assign(size_t(p->blocks * kS8Block), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = q[n * K + k];
      p->q[size_t(s8_offset(n, k, p->Kp))] = v;
      p->sum[size_t(n)] += v;
    }
  return p;
}

std::shared_ptr<Int8Weights> pack_int8(const float* w, int64_t N, int64_t K) {
  Scratch<int8_t> q(static_cast<size_t>(N * K));
  Scratch<float> scale(static_cast<size_t>(N));
  quantize_weights_s8(q.data(), scale.data(), w, N, K);
  return pack_int8(q.data(), scale.data(), N, K);
}

void quantize_rows_s8(int8_t* q, int64_t ldq, float* scale, const float* x, int64_t M, int64_t K) {
  const QuantizeRowS8 quantize = kernels().quantize_row_s8;
  for_items(M, threads_for(M * K), [&](int64_t m) { scale[m] = quantize(q + m * ldq, x + m * K, K, ldq); });
}

void linear_forward_int8(float* y, const float* x, const Int8Weights& w, const float* b, int64_t M,
                         bool gelu) {
  const int64_t N = w.N, Kp = w.Kp;
  static thread_local Scratch<int8_t> xq_buf;
  static thread_local Scratch<float> sx_buf;
  int8_t* xq = grown(xq_buf, M * Kp);
  float* sx = grown(sx_buf, M);
  quantize_rows_s8(xq, Kp, sx, x, M, w.K);
  const CpuKernels& k = kernels();
  const int64_t row_tiles = (M + kRowTile - 1) / kRowTile;
  const int64_t block_tiles = (w.blocks + kBlockTile - 1) / kBlockTile;
  // Tiles of one block group are consecutive, so a thread's tiles share their weights.
  for_items(row_tiles * block_tiles, threads_for(M * N * Kp), [&](int64_t t) {
    const int64_t bt = t / row_tiles, rt = t % row_tiles;
    const int64_t m0 = rt * kRowTile, rows = std::min(kRowTile, M - m0);
    const int64_t b0 = bt * kBlockTile, nb = std::min(kBlockTile, w.blocks - b0);
    alignas(64) int32_t C[kRowTile * kBlockTile * kS8Block];
    constexpr int64_t ldc = kBlockTile * kS8Block;
    k.gemm_s8(C, ldc, xq + m0 * Kp, Kp, rows, w.q.data() + b0 * Kp * kS8Block, w.sum.data() + b0 * kS8Block,
              nb, Kp);
    const int64_t n0 = b0 * kS8Block, n1 = std::min(N, n0 + nb * kS8Block);
    k.dequant_s8(y + m0 * N + n0, N, C, ldc, sx + m0, w.scale.data() + n0, b ? b + n0 : nullptr, rows,
                 n1 - n0);
  });
  if (gelu) gelu_forward(y, y, M * N);
}

}  // namespace vit::cpu
