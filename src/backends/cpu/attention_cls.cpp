// Attention for the first Q queries alone (the class token's, and DeiT's distillation token's):
// rows 0..Q-1 of every sample attend over all T keys. A model that pools those tokens reads
// nothing else of its last block (ViT::run_forward's class-token tail), so that block needs q
// only at those rows, and k and v everywhere. The same arithmetic as attention.cpp's rows
// (scale q k^T, masked keys out, softmax, dropout with the same element indices, P v), in
// plain loops: per (sample, head, row) 2 T D multiply-adds forward and 4 T D backward, a Q/T
// share of the full attention. The attention pool (timm's AttentionPoolLatent) runs the same
// loops for its learned queries.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_table.h"  // with_constant

namespace vit::cpu {

namespace {
// Index of element (b, h, r, 0) of a [B, H, T, T] probability tensor in the whole batch:
// where attention dropout's draws for query row r start.
inline int64_t drop_first(int64_t first_sample, int64_t b, int64_t h, int64_t r, int64_t H, int64_t T) {
  return (((first_sample + b) * H + h) * T + r) * T;
}

// The per-head loops below with the head width D as a compile-time constant for the common
// widths (mnist-seed's 4, cifar-seed's and ViT's 64, ...), so that the loops over d unroll
// and vectorize, else at run time: the same operations in the same order either way, so the
// same bits (without -ffast-math the compiler reorders no sum).
template <typename F>
void with_head_width(int64_t D, F&& f) {
  if (!with_constant<4, 8, 16, 32, 64>(D, [&]<int W>() { f(std::integral_constant<int64_t, W>{}); })) f(D);
}

// P[j] = scale q . k_j over the T keys (k's rows ld apart).
template <typename W>
void scores(W D, float* P, const float* q, const float* k, int64_t T, int64_t ld, float scale) {
  for (int64_t j = 0; j < T; ++j) {
    float s = 0.f;
    for (int64_t d = 0; d < D; ++d) s += q[d] * k[j * ld + d];
    P[j] = s * scale;
  }
}
// o = sum_j P[j] v_j, in j order.
template <typename W>
void weighted_values(W D, float* o, const float* P, const float* v, int64_t T, int64_t ld) {
  std::memset(o, 0, size_t(int64_t(D)) * sizeof(float));
  for (int64_t j = 0; j < T; ++j)
    for (int64_t d = 0; d < D; ++d) o[d] += P[j] * v[j * ld + d];
}
// dP = dO v^T into dS, and dv = P^T dO (assigned for the first row, added for the others).
template <typename W>
void value_grads(W D, float* dS, float* dv, const float* dO, const float* v, const float* P, int64_t T,
                 int64_t ld, bool add) {
  for (int64_t j = 0; j < T; ++j) {
    float s = 0.f;
    for (int64_t d = 0; d < D; ++d) {
      s += dO[d] * v[j * ld + d];
      dv[j * ld + d] = (add ? dv[j * ld + d] : 0.f) + P[j] * dO[d];
    }
    dS[j] = s;
  }
}
// dq = scale dS k and dk = scale dS^T q (assigned for the first row, added for the others).
template <typename W>
void query_key_grads(W D, float* dq, float* dk, const float* dS, const float* q, const float* k, int64_t T,
                     int64_t ld, float scale, bool add) {
  std::memset(dq, 0, size_t(int64_t(D)) * sizeof(float));
  for (int64_t j = 0; j < T; ++j)
    for (int64_t d = 0; d < D; ++d) {
      dq[d] += scale * dS[j] * k[j * ld + d];
      dk[j * ld + d] = (add ? dk[j * ld + d] : 0.f) + scale * dS[j] * q[d];
    }
}
}  // namespace

namespace {
// Where one op's Q query rows and its keys and values are: query r of sample b, head h at
// q + b * q_batch + r * q_row + h * D (the attention pool's are shared: q_batch 0), its
// gradient at dq + b * dq_batch + r * q_row + h * D; head h's T keys of sample b at
// kv + b * kv_batch + k_off + h * D, rows ld apart, its values C after them.
struct Layout {
  int64_t q_batch, dq_batch, q_row, ld, k_off, kv_batch;
};

// The per-(sample, head) forward both ops run: scores, masked softmax, dropout (drop_p > 0,
// the full op's element indices), P v into out[B,Q,C].
void heads_forward(const Layout& L, float* out, float* probs, float* probs_drop, const float* q,
                   const float* kv, const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H,
                   int64_t Q, float drop_p, uint64_t drop_key, int64_t first_sample) {
  const int64_t D = C / H, ld = L.ld;
  const float scale = 1.f / std::sqrt(float(D));
  for_ranges(B * H, threads_for(B * H * Q * T * D * 2), [&](int64_t i0, int64_t i1) {
    thread_local Scratch<float> buf;
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const float* k = kv + b * L.kv_batch + L.k_off + h * D;
      const float* v = k + C;
      for (int64_t r = 0; r < Q; ++r) {
        const int64_t row = bh * Q + r;  // [B, H, Q, T]
        float* P = probs ? probs + row * T : grown(buf, T);
        const float* qr = q + b * L.q_batch + r * L.q_row + h * D;
        with_head_width(D, [&](auto width) { scores(width, P, qr, k, T, ld, scale); });
        softmax_rows(P, 1, T, key_mask ? key_mask + b * T : nullptr);
        const float* Pv = P;
        if (probs_drop) {
          drop_probs(probs_drop + row * T, P, T, drop_p, drop_key, drop_first(first_sample, b, h, r, H, T));
          Pv = probs_drop + row * T;
        }
        float* o = out + (b * Q + r) * C + h * D;
        with_head_width(D, [&](auto width) { weighted_values(width, o, Pv, v, T, ld); });
      }
    }
  });
}

// Its backward: dq (assigned) at the queries' places, rows Q..T-1 of each sample zeroed too
// with zero_rest (the class-token tail's dqkv), dk and dv (assigned) in dkv (laid out as kv),
// from dout[B,Q,C].
void heads_backward(const Layout& L, float* dq, float* dkv, const float* dout, const float* q,
                    const float* kv, const float* probs, const float* probs_drop, int64_t B, int64_t T,
                    int64_t C, int64_t H, int64_t Q, float drop_p, uint64_t drop_key, int64_t first_sample,
                    bool zero_rest) {
  const int64_t D = C / H, ld = L.ld;
  const float scale = 1.f / std::sqrt(float(D));
  for_ranges(B * H, threads_for(B * H * Q * T * D * 4), [&](int64_t i0, int64_t i1) {
    thread_local Scratch<float> buf;
    float* dS = grown(buf, T);
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H, o = b * L.kv_batch + L.k_off + h * D;
      const float *k = kv + o, *v = k + C;
      float *dk = dkv + o, *dv = dk + C;
      for (int64_t r = 0; r < Q; ++r) {  // dk and dv sum over the rows, in row order
        const int64_t row = bh * Q + r, qo = r * L.q_row + h * D;
        const float* P = probs + row * T;
        const float* Pv = probs_drop ? probs_drop + row * T : P;
        const float* dO = dout + (b * Q + r) * C + h * D;
        with_head_width(D, [&](auto width) { value_grads(width, dS, dv, dO, v, Pv, T, ld, r > 0); });
        if (probs_drop) drop_probs(dS, dS, T, drop_p, drop_key, drop_first(first_sample, b, h, r, H, T));
        softmax_backward_rows(dS, P, 1, T);  // dS = P (dP - sum_j P dP)
        with_head_width(D, [&](auto width) {
          query_key_grads(width, dq + b * L.dq_batch + qo, dk, dS, q + b * L.q_batch + qo, k, T, ld, scale,
                          r > 0);
        });
      }
      if (zero_rest)  // the other queries take no gradient
        for (int64_t t = Q; t < T; ++t)
          std::memset(dq + b * L.dq_batch + t * L.q_row + h * D, 0, size_t(D) * sizeof(float));
    }
  });
}
}  // namespace

// qkv [B,T,3C]: the queries are rows 0..Q-1 of each sample's q columns.
void attention_cls_forward(float* out, float* probs, float* probs_drop, const float* qkv,
                           const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                           uint64_t drop_key, int64_t first_sample, int64_t Q) {
  const Layout L{T * 3 * C, T * 3 * C, 3 * C, 3 * C, C, T * 3 * C};
  heads_forward(L, out, probs, probs_drop, qkv, qkv, key_mask, B, T, C, H, Q, drop_p, drop_key, first_sample);
}

void attention_cls_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                            const float* probs_drop, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                            uint64_t drop_key, int64_t first_sample, int64_t Q) {
  const Layout L{T * 3 * C, T * 3 * C, 3 * C, 3 * C, C, T * 3 * C};
  heads_backward(L, dqkv, dqkv, dout, qkv, qkv, probs, probs_drop, B, T, C, H, Q, drop_p, drop_key,
                 first_sample, true);
}

// The attention pool: the queries q [L,C] shared by every sample, keys and values in kv
// [B,T,2C], of which rows first..T-1 of each sample are read; each sample's dq its own [L,C]
// rows of dq [B,L,C].
void attention_pool_forward(float* out, float* probs, const float* q, const float* kv,
                            const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H, int64_t L,
                            int64_t first) {
  const Layout lay{0, L * C, C, 2 * C, first * 2 * C, T * 2 * C};
  heads_forward(lay, out, probs, nullptr, q, kv, key_mask, B, T - first, C, H, L, 0.f, 0, 0);
}

void attention_pool_backward(float* dq, float* dkv, const float* dout, const float* q, const float* kv,
                             const float* probs, int64_t B, int64_t T, int64_t C, int64_t H, int64_t L,
                             int64_t first) {
  const Layout lay{0, L * C, C, 2 * C, first * 2 * C, T * 2 * C};
  heads_backward(lay, dq, dkv, dout, q, kv, probs, nullptr, B, T - first, C, H, L, 0.f, 0, 0, false);
  for (int64_t b = 0; b < B; ++b)  // the rows the pool does not read take no gradient
    std::memset(dkv + b * T * 2 * C, 0, size_t(first * 2 * C) * sizeof(float));
}

}  // namespace vit::cpu
