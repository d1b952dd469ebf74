// int8 inference linear (int8.h): weights quantized and packed once; at each call the kernel
// table's quantize_row_s8 on the activations, then per tile of rows x 64 output channels its
// gemm_s8 and the fp32 epilogue dequant_s8 (rounded as written, no fused multiply-add), so
// the outputs have the same bits on every path and thread count. On AMX, oneDNN's product
// (linear_int8_onednn.cpp) takes a chunk of rows at a time instead of gemm_s8, with the same
// epilogue. The MLP runs fc1, its activation and fc2 a chunk of rows at a time.
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
// Rows per chunk of the oneDNN product's sums and of the MLP's hidden activations: about 3 MiB
// of them (ViT-B's 3072-wide hidden layer: 256 rows; on an Intel Xeon 256 was the fastest of
// 128, 256 and 512 in bench_gemm's fc1, and of 128 and 256 in ViT-B/16's MLP), at least 64
// rows; narrow layers (mnist-seed's) take all their rows at once, as every chunk costs each
// parallel pass's start.
constexpr int64_t kChunkBytes = int64_t(3) << 20, kMinChunk = 64;
}  // namespace

void quantize_weights_s8(int8_t* q, float* scale, const float* w, int64_t N, int64_t K) {
  for_items(N, threads_for(N * K), [&](int64_t n) {
    scale[n] = quantize_row_s8_reference(q + n * K, w + n * K, K, K);
    VIT_CHECK(std::isfinite(scale[n]), "int8: weight row ", n, " holds a NaN or infinity");
  });
}

std::shared_ptr<Int8Weights> pack_int8(const int8_t* q, const float* scale, int64_t N, int64_t K,
                                       std::optional<Int8Product> chosen) {
  const Int8Product product = chosen.value_or(int8_product(N, K));
  VIT_CHECK(N > 0 && K > 0 && K <= kS8MaxK, "int8: a [", N, ", ", K,
            "] weight is outside the int8 products' ", "range (K at most ", kS8MaxK, ")");
  auto p = std::make_shared<Int8Weights>();
  p->N = N, p->K = K;
  p->Kp = (K + kS8Group - 1) / kS8Group * kS8Group;
  p->blocks = (N + kS8Block - 1) / kS8Block;
  p->product = product;
  p->scale.assign(scale, scale + N);
  if (product == Int8Product::onednn) {
    p->onednn = pack_s8_onednn(q, N, K);
    return p;
  }
  p->q.assign(size_t(p->blocks * p->Kp * kS8Block), 0);
  p->sum.assign(size_t(p->blocks * kS8Block), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = q[n * K + k];
      p->q[size_t(s8_offset(n, k, p->Kp))] = v;
      p->sum[size_t(n)] += v;
    }
  return p;
}

std::shared_ptr<Int8Weights> pack_int8(const float* w, int64_t N, int64_t K,
                                       std::optional<Int8Product> product) {
  Scratch<int8_t> q(static_cast<size_t>(N * K));
  Scratch<float> scale(static_cast<size_t>(N));
  quantize_weights_s8(q.data(), scale.data(), w, N, K);
  return pack_int8(q.data(), scale.data(), N, K, product);
}

void quantize_rows_s8(int8_t* q, int64_t ldq, float* scale, const float* x, int64_t M, int64_t K) {
  const QuantizeRowS8 quantize = kernels().quantize_row_s8;
  for_items(M, threads_for(M * K), [&](int64_t m) { scale[m] = quantize(q + m * ldq, x + m * K, K, ldq); });
}

namespace {
// y[rows, N] = the layer on rows already quantized (xq [rows, Kp], scales sx), by w's product.
void product_rows(float* y, const int8_t* xq, const float* sx, const Int8Weights& w, const float* b,
                  int64_t rows) {
  const int64_t N = w.N, Kp = w.Kp;
  const CpuKernels& k = kernels();
  if (w.product == Int8Product::onednn) {
    // oneDNN's sums of every row, then the epilogue on row tiles.
    static thread_local Scratch<int32_t> c_buf;
    int32_t* C = grown(c_buf, rows * N);
    gemm_s8_onednn(C, N, xq, Kp, rows, *w.onednn);
    for_items((rows + kRowTile - 1) / kRowTile, threads_for(rows * N * 8), [&](int64_t t) {
      const int64_t r0 = t * kRowTile, r = std::min(kRowTile, rows - r0);
      k.dequant_s8(y + r0 * N, N, C + r0 * N, N, sx + r0, w.scale.data(), b, r, N);
    });
    return;
  }
  const int64_t row_tiles = (rows + kRowTile - 1) / kRowTile;
  const int64_t block_tiles = (w.blocks + kBlockTile - 1) / kBlockTile;
  // Tiles of one block group are consecutive, so a thread's tiles share their weights.
  for_items(row_tiles * block_tiles, threads_for(rows * N * Kp), [&](int64_t t) {
    const int64_t bt = t / row_tiles, rt = t % row_tiles;
    const int64_t m0 = rt * kRowTile, r = std::min(kRowTile, rows - m0);
    const int64_t b0 = bt * kBlockTile, nb = std::min(kBlockTile, w.blocks - b0);
    alignas(64) int32_t C[kRowTile * kBlockTile * kS8Block];
    constexpr int64_t ldc = kBlockTile * kS8Block;
    k.gemm_s8(C, ldc, xq + m0 * Kp, Kp, r, w.q.data() + b0 * Kp * kS8Block, w.sum.data() + b0 * kS8Block, nb,
              Kp);
    const int64_t n0 = b0 * kS8Block, n1 = std::min(N, n0 + nb * kS8Block);
    k.dequant_s8(y + m0 * N + n0, N, C, ldc, sx + m0, w.scale.data() + n0, b ? b + n0 : nullptr, r, n1 - n0);
  });
}

// Rows per chunk of M for values `width` floats (or int32) wide.
int64_t chunk_rows(int64_t width, int64_t M) {
  return std::min(M, std::max(kMinChunk, kChunkBytes / (width * 4) / 16 * 16));
}

// x's rows quantized into a per-thread buffer (slot 0: a layer's input, 1: the MLP's hidden
// rows), leading dim w.Kp; their scales into sx.
const int8_t* quantized(int slot, const float* x, const Int8Weights& w, int64_t rows, float*& sx) {
  static thread_local Scratch<int8_t> q_buf[2];
  static thread_local Scratch<float> s_buf[2];
  int8_t* q = grown(q_buf[slot], rows * w.Kp);
  sx = grown(s_buf[slot], rows);
  quantize_rows_s8(q, w.Kp, sx, x, rows, w.K);
  return q;
}
}  // namespace

void linear_forward_int8(float* y, const float* x, const Int8Weights& w, const float* b, int64_t M,
                         bool gelu) {
  // The onednn product's sums a chunk at a time, in cache for the epilogue; the table's
  // kernels tile on their own.
  const int64_t chunk = w.product == Int8Product::onednn ? chunk_rows(w.N, M) : M;
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t rows = std::min(chunk, M - m0);
    float* sx = nullptr;
    const int8_t* xq = quantized(0, x + m0 * w.K, w, rows, sx);
    product_rows(y + m0 * w.N, xq, sx, w, b, rows);
  }
  if (gelu) gelu_forward(y, y, M * w.N);
}

void mlp_forward_int8(float* y, const float* x, const Int8Weights& fc1, const float* b1,
                      const Int8Weights& fc2, const float* b2, int64_t M, Activation act) {
  VIT_CHECK(fc2.K == fc1.N, "int8 MLP: fc2 takes ", fc2.K, " inputs, fc1 gives ", fc1.N);
  static thread_local Scratch<float> h_buf;
  const int64_t Hd = fc1.N, chunk = chunk_rows(std::max(Hd, fc2.N), M);
  float* h = grown(h_buf, chunk * Hd);
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t rows = std::min(chunk, M - m0);
    float *sx = nullptr, *sh = nullptr;
    const int8_t* xq = quantized(0, x + m0 * fc1.K, fc1, rows, sx);
    product_rows(h, xq, sx, fc1, b1, rows);
    act_forward(h, h, rows * Hd, act);
    const int8_t* hq = quantized(1, h, fc2, rows, sh);
    product_rows(y + m0 * fc2.N, hq, sh, fc2, b2, rows);
  }
}

}  // namespace vit::cpu
