// Multi-head scaled dot-product self-attention (timm's Attention between qkv and proj):
// per (batch, head) S = scale q k^T, masked keys to -inf, softmax, dropout, out = P v.
// Parallel over (batch, head): each pair writes disjoint memory, so results do not depend
// on the thread count. The matrix products run single-threaded inside the parallel loop.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu.h"
#include "vit/core/rng.h"

namespace vit::cpu {

namespace {
// Start of head h of sample b inside qkv[B,T,3C] (its q; k and v follow at +C and +2C).
inline int64_t head_offset(int64_t b, int64_t h, int64_t T, int64_t C, int64_t D) {
  return b * T * 3 * C + h * D;
}

// dst = src with attention dropout: element first+i kept (scaled by 1/(1-p)) or zeroed,
// by the same counter-based draw in forward and backward. dst may equal src.
void drop_probs(float* dst, const float* src, int64_t n, float p, uint64_t key, int64_t first) {
  const float keep_scale = 1.f / (1.f - p);
  for (int64_t i = 0; i < n; ++i) dst[i] = uniform_at(key, first + i) >= p ? src[i] * keep_scale : 0.f;
}
}  // namespace

void attention_forward(float* out, float* probs, float* probs_drop, const float* qkv, const uint8_t* key_mask,
                       int64_t B, int64_t T, int64_t C, int64_t H, float drop_p, uint64_t drop_key) {
  const int64_t D = C / H, ld = 3 * C;
  const float scale = 1.f / std::sqrt(float(D));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const float* q = qkv + head_offset(b, h, T, C, D);
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* P = probs + bh * T * T;
    gemm(false, true, T, T, D, scale, q, ld, k, ld, 0.f, P, T);
    const uint8_t* km = key_mask ? key_mask + b * T : nullptr;
    for (int64_t i = 0; i < T; ++i) {
      float* row = P + i * T;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < T; ++j) {
        if (km && !km[j]) row[j] = -std::numeric_limits<float>::infinity();
        mx = row[j] > mx ? row[j] : mx;
      }
      if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked
        std::memset(row, 0, T * sizeof(float));
        continue;
      }
      float sum = 0.f;
      for (int64_t j = 0; j < T; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      float inv = 1.f / sum;
      for (int64_t j = 0; j < T; ++j) row[j] *= inv;
    }
    const float* Pv = P;
    if (probs_drop) {
      float* Pd = probs_drop + bh * T * T;
      drop_probs(Pd, P, T * T, drop_p, drop_key, bh * T * T);
      Pv = Pd;
    }
    gemm(false, false, T, D, T, 1.f, Pv, T, v, ld, 0.f, out + b * T * C + h * D, C);
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs,
                        const float* probs_drop, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                        uint64_t drop_key) {
  const int64_t D = C / H, ld = 3 * C;
  const float scale = 1.f / std::sqrt(float(D));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const float* q = qkv + head_offset(b, h, T, C, D);
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + head_offset(b, h, T, C, D);
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* P = probs + bh * T * T;
    const float* Pv = probs_drop ? probs_drop + bh * T * T : P;
    const float* dO = dout + b * T * C + h * D;
    float* dP = scratch + bh * T * T;
    gemm(false, true, T, T, D, 1.f, dO, C, v, ld, 0.f, dP, T);   // dP = dO v^T
    gemm(true, false, T, D, T, 1.f, Pv, T, dO, C, 0.f, dv, ld);  // dv = P^T dO
    if (probs_drop) drop_probs(dP, dP, T * T, drop_p, drop_key, bh * T * T);
    // Softmax backward: dS = P * (dP - sum_j P dP).
    for (int64_t i = 0; i < T; ++i) {
      const float* p = P + i * T;
      float* d = dP + i * T;
      float dot = 0.f;
      for (int64_t j = 0; j < T; ++j) dot += p[j] * d[j];
      for (int64_t j = 0; j < T; ++j) d[j] = p[j] * (d[j] - dot);
    }
    gemm(false, false, T, D, T, scale, dP, T, k, ld, 0.f, dq, ld);  // dq = scale dS k
    gemm(true, false, T, D, T, scale, dP, T, q, ld, 0.f, dk, ld);   // dk = scale dS^T q
  }
}

}  // namespace vit::cpu
