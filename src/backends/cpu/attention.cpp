// Multi-head scaled dot-product self-attention (timm's Attention between qkv and proj):
// per (batch, head) S = scale q k^T, masked keys to -inf, softmax, dropout, out = P v.
// Parallel over (batch, head), the forward also over blocks of query rows when there are
// few pairs: each item writes disjoint memory, so results do not depend on the thread
// count. The matrix products run single-threaded inside the parallel loop. Narrow heads
// (D <= 8) without attention dropout take attention_lanes.cpp's forward (avx512/, avx2/, neon/)
// instead, and attention_narrow.cpp's one-pass backward. The register-block kernels run
// where the path has them (head_kernels()), the gemm() calls otherwise.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/kernel_set.h"
#include "core/rng.h"
#include "core/threads.h"

namespace vit::cpu {

namespace {
// A narrow head's slice of a qkv row is one or two cache lines, rows 3C floats apart, and no
// two heads share a line: the hardware prefetchers follow none of those strides. Reading the
// sample's rows in order first puts them in L2 for all its heads: once per sample in each
// thread's range of items, only when the batch's qkv does not fit in L2 anyway and heads
// are narrow, and only where the path has warm_rows (docs/design.md, "Fast kernels and
// threads", has the measurements and what was tried instead).
constexpr int64_t kWarmMaxD = 32, kWarmMinBatchBytes = 2 << 20;
bool warm_samples(int64_t B, int64_t T, int64_t C, int64_t D) {
  return kernels().warm_rows && D <= kWarmMaxD && B * T * 3 * C * int64_t(sizeof(float)) > kWarmMinBatchBytes;
}

// The rows' cache lines read in order (warm_samples says when).
void warm_lines(const float* p, int64_t n) {
  kernels().warm_rows(p, n);
}

// Where an item's probabilities go when the caller keeps none (inference): per thread,
// grown once, then reused, so they stay in cache for P v.
float* item_scratch(int64_t n) {
  thread_local Scratch<float> P;
  return grown(P, n);
}

// The register-block path (head_kernels(): avx512/ or avx2/ head_gemm.cpp).

// A head's k (or v) rows [T, D] transposed to [D, ldk] in a per-thread scratch (grown
// once, then reused), ldk = T rounded up to 16, for head_scores.
float* transposed_keys(const float* k, int64_t ld, int64_t T, int64_t D, int64_t* ldk) {
  thread_local Scratch<float> buf;
  *ldk = (T + 15) / 16 * 16;
  float* kT = grown(buf, D * *ldk);
  head_transpose(kT, *ldk, k, ld, T, D);
  return kT;
}

// A head's rows [T, D] of q, k, v or dout copied to a per-thread [T, D] scratch (one per
// slot; grown once, then reused) for the products that read them as B, a row per k. In qkv
// they are 3C floats apart: at ViT-B/16's C = 768 that is 9 KiB, so every row falls on the
// same 4 of L1's 64 sets and the product re-reads them from L2; the copy costs far less than
// those re-reads (docs/history/benchmarks-2026-11.md).
constexpr int64_t kCopyRowsMinD = 32;
enum Slot { kSlotV, kSlotQ, kSlotK, kSlotDOut, kSlots };
const float* contiguous_rows(Slot slot, const float* src, int64_t ld, int64_t T, int64_t D) {
  thread_local Scratch<float> bufs[kSlots];
  float* dst = grown(bufs[slot], T * D);
  for (int64_t t = 0; t < T; ++t) std::memcpy(dst + t * D, src + t * ld, size_t(D) * sizeof(float));
  return dst;
}

// C[M, D] = alpha A B[K, D] for a narrow head (D <= kNarrowD), with A(i, k) = A[i ars +
// k aks]. head_gemm keeps D along the vector lanes, so D = 4 (mnist-seed) uses 4 lanes of
// 16; here C^T = B^T A^T puts A's M rows along the lanes instead. A^T is A itself when A
// is stored transposed (ars = 1: P^T dO, dS^T q), else a transposed copy (P v, dS k).
// Measured per head in docs/design.md ("Instruction sets").
constexpr int64_t kNarrowD = 8;
void narrow_head_gemm(int64_t M, int64_t D, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                      const float* B, int64_t ldb, float* C, int64_t ldc) {
  thread_local Scratch<float> buf;
  const int64_t ldm = (M + 15) / 16 * 16;
  float* ct = grown(buf, (D + (ars == 1 ? 0 : K)) * ldm);
  const float* at = A;
  int64_t ldat = aks;
  if (ars != 1) {  // A is [M, K] with leading dim ars: transpose it to [K, M]
    float* t = ct + D * ldm;
    head_transpose(t, ldm, A, ars, M, K);
    at = t;
    ldat = ldm;
  }
  head_gemm(D, M, K, alpha, B, 1, ldb, at, ldat, 0.f, nullptr, ct, ldm);  // C^T = B^T A^T: [D, M]
  head_transpose(C, ldc, ct, ldm, D, M);
}

// A head's product C[M, D] = alpha A B in register blocks, narrow heads the other way round.
void head_product(int64_t M, int64_t D, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                  const float* B, int64_t ldb, float* C, int64_t ldc) {
  if (D <= kNarrowD)
    narrow_head_gemm(M, D, K, alpha, A, ars, aks, B, ldb, C, ldc);
  else
    head_gemm(M, D, K, alpha, A, ars, aks, B, ldb, 0.f, nullptr, C, ldc);
}

// The number of threads for B*H heads of T x T x D products (4 of them in backward).
int attention_threads(int64_t B, int64_t H, int64_t T, int64_t D) {
  const int nt = threads_for(B * H * T * T * D * 2);
  return int(B * H) < nt ? int(B * H) : nt;
}

// Query rows per work item of the forward. With the register-block kernels the rows of one
// head are independent (S = q k^T, softmax and P v row by row, each row's arithmetic the
// same in any block), so when the (sample, head) pairs do not spread evenly over the threads
// they are split into row blocks: ViT-Ti at batch 1 has 3 heads, 2 of them on one thread of
// two otherwise. Pairs that do spread evenly stay whole (ViT-B/16 at batch 1: 12 heads on 2
// threads), which saves each block's partial register blocks and its own copy of k
// transposed. The gemm() path does not split: oneDNN's sgemm gives a row different bits
// depending on how many rows the call has, and so the results would depend on the threads.
int64_t forward_row_block(int64_t B, int64_t H, int64_t T, int nt, bool rows_independent) {
  if (!rows_independent || B * H >= 16 || (B * H >= nt && B * H % nt == 0)) return T;
  const int64_t blocks = (T + 63) / 64;
  return (T + blocks - 1) / blocks;
}
}  // namespace

void drop_probs(float* dst, const float* src, int64_t n, float p, uint64_t key, int64_t first) {
  const float keep_scale = 1.f / (1.f - p);
  for (int64_t i = 0; i < n; ++i) dst[i] = uniform_at(key, first + i) >= p ? src[i] * keep_scale : 0.f;
}

void softmax_rows_reference(float* P, int64_t rows, int64_t n, const uint8_t* km) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = P + i * n;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      if (km && !km[j]) row[j] = -std::numeric_limits<float>::infinity();
      mx = row[j] > mx ? row[j] : mx;
    }
    if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked
      std::memset(row, 0, n * sizeof(float));
      continue;
    }
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    float inv = 1.f / sum;
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  }
}

void softmax_rows(float* P, int64_t rows, int64_t n, const uint8_t* km) {
  kernels().softmax_rows(P, rows, n, km);
}

void exp_nonpos(float* y, const float* x, int64_t n) {
  kernels().exp_nonpos(y, x, n);
}

void exp_nonpos_reference(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < -87.3365f ? 0.f : std::exp(x[i]);
}

void softmax_backward_rows_reference(float* dP, const float* P, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* p = P + i * n;
    float* d = dP + i * n;
    float dot = 0.f;
    for (int64_t j = 0; j < n; ++j) dot += p[j] * d[j];
    for (int64_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot);
  }
}

void softmax_backward_rows(float* dP, const float* P, int64_t rows, int64_t n) {
  kernels().softmax_backward_rows(dP, P, rows, n);
}

namespace {
// Samples in lanes (attention_lanes.cpp) come in groups of 16 (AVX-512), 8 (AVX2) or 4
// (NEON); on x86 a last group of fewer than 3/4 of that costs more (a group's work whatever
// its size) than per head, so those samples go per head. NEON (speed unmeasured) takes
// whole groups only: with a last group of 3, a batch of 3 would leave the per-head path,
// whose row 0 has the bits of the class-token tail's attention (attention_cls.cpp; test_viz's
// Attention.InferReturnsTheProbabilitiesAndTheSameLogits holds them equal at B = 3). The
// split depends on the batch size alone.
// The path's lanes kernel where it fits (run null otherwise).
AttentionLanes lanes_kernel(int64_t T, int64_t C, int64_t H) {
  const AttentionLanes& lanes = kernels().attention_lanes;
  return lanes.run && lanes.fit(T, C, H) ? lanes : AttentionLanes{};
}

// The path's one-pass backward for narrow heads (attention_narrow.cpp), or null.
AttentionBackwardNarrow narrow_backward(int64_t T, int64_t D) {
  const CpuKernels& k = kernels();
  return k.attention_backward_narrow && k.attention_backward_narrow_fits(T, D) ? k.attention_backward_narrow
                                                                               : nullptr;
}

void attention_forward_heads(float* out, float* probs, float* probs_drop, const float* qkv,
                             const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H,
                             float drop_p, uint64_t drop_key, int64_t first_sample);
}  // namespace

void attention_forward(float* out, float* probs, float* probs_drop, const float* qkv, const uint8_t* key_mask,
                       int64_t B, int64_t T, int64_t C, int64_t H, float drop_p, uint64_t drop_key,
                       int64_t first_sample) {
  const int64_t ld = 3 * C, D = C / H;
  const AttentionLanes lanes = probs_drop ? AttentionLanes{} : lanes_kernel(T, C, H);
  const int64_t G = lanes.group;
  // Samples [0, in_lanes) in groups of G along the lanes.
  const int64_t in_lanes = !lanes.run ? 0 : B % G >= lanes.min_last ? B : B / G * G;
  if (in_lanes > 0) {
    const int64_t groups = (in_lanes + G - 1) / G;
    for_items(groups, threads_for(B * H * T * T * D * 2), [&](int64_t g) {
      const int64_t b0 = g * G, n = std::min<int64_t>(G, B - b0);
      lanes.run(out + b0 * T * C, probs ? probs + b0 * H * T * T : nullptr, qkv + b0 * T * ld,
                key_mask ? key_mask + b0 * T : nullptr, n, T, C, H);
    });
  }
  if (in_lanes < B) {
    const int64_t b0 = in_lanes;
    attention_forward_heads(out + b0 * T * C, probs ? probs + b0 * H * T * T : nullptr,
                            probs_drop ? probs_drop + b0 * H * T * T : nullptr, qkv + b0 * T * ld,
                            key_mask ? key_mask + b0 * T : nullptr, B - b0, T, C, H, drop_p, drop_key,
                            first_sample + b0);
  }
}

namespace {
void attention_forward_heads(float* out, float* probs, float* probs_drop, const float* qkv,
                             const uint8_t* key_mask, int64_t B, int64_t T, int64_t C, int64_t H,
                             float drop_p, uint64_t drop_key, int64_t first_sample) {
  const int64_t D = C / H, ld = 3 * C;
  const float scale = 1.f / std::sqrt(float(D));
  const int nt = threads_for(B * H * T * T * D * 2);
  const bool fast = head_kernels(), warm = warm_samples(B, T, C, D);
  const int64_t rb = forward_row_block(B, H, T, nt, fast), nb = (T + rb - 1) / rb;
  for_ranges(B * H * nb, nt, [&](int64_t i0, int64_t i1) {
    const float* kT = nullptr;  // k transposed and v copied, for the head of the items before
    const float* kT_of = nullptr;
    const float* vc = nullptr;
    int64_t ldk = 0;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t bh = item / nb, r0 = (item % nb) * rb, rows = T - r0 < rb ? T - r0 : rb;
      const int64_t b = bh / H, h = bh % H;
      if (warm && (item == i0 || item % (H * nb) == 0)) warm_lines(qkv + b * T * 3 * C, T * 3 * C);
      const float* q = qkv + head_offset(b, h, T, C, D);
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* P = probs ? probs + bh * T * T + r0 * T : item_scratch(rows * T);
      const uint8_t* km = key_mask ? key_mask + b * T : nullptr;
      if (fast) {  // S and its softmax, then P v: register blocks
        if (k != kT_of) {
          kT = transposed_keys(k, ld, T, D, &ldk), kT_of = k;
          vc = D >= kCopyRowsMinD ? contiguous_rows(kSlotV, v, ld, T, D) : nullptr;
        }
        head_scores(HeadScores::Softmax, rows, T, D, scale, q + r0 * ld, ld, kT, ldk, km, nullptr, P, T);
      } else {
        gemm(false, true, rows, T, D, scale, q + r0 * ld, ld, k, ld, 0.f, P, T);
        softmax_rows(P, rows, T, km);
      }
      const float* Pv = P;
      if (probs_drop) {
        float* Pd = probs_drop + bh * T * T + r0 * T;
        drop_probs(Pd, P, rows * T, drop_p, drop_key, (first_sample * H + bh) * T * T + r0 * T);
        Pv = Pd;
      }
      float* o = out + (b * T + r0) * C + h * D;
      if (fast)
        head_product(rows, D, T, 1.f, Pv, T, 1, vc ? vc : v, vc ? D : ld, o, C);
      else
        gemm(false, false, rows, D, T, 1.f, Pv, T, v, ld, 0.f, o, C);
    }
  });
}
}  // namespace

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const float* probs_drop, int64_t B, int64_t T, int64_t C, int64_t H, float drop_p,
                        uint64_t drop_key, int64_t first_sample) {
  const int64_t D = C / H, ld = 3 * C;
  const float scale = 1.f / std::sqrt(float(D));
  const bool fast = head_kernels(), warm = warm_samples(B, T, C, D);
  const AttentionBackwardNarrow narrow = probs_drop ? nullptr : narrow_backward(T, D);
  for_ranges(B * H, attention_threads(B, H, T, D), [&](int64_t i0, int64_t i1) {
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      if (warm && (bh == i0 || h == 0))
        warm_lines(qkv + b * T * 3 * C, T * 3 * C), warm_lines(dout + b * T * C, T * C);
      const auto [q, k, v, dq, dk, dv] = head_grads(qkv, dqkv, b, h, T, C, D);
      const float* P = probs + bh * T * T;
      const float* Pv = probs_drop ? probs_drop + bh * T * T : P;
      const float* dO = dout + b * T * C + h * D;
      if (narrow) {  // one pass (attention_narrow.cpp)
        narrow(dq, dk, dv, q, k, v, ld, dO, C, P, T, D, scale);
        continue;
      }
      float* dP = item_scratch(T * T);  // this head's dP, then dS: per thread, in cache
      if (!fast) {
        gemm(false, true, T, T, D, 1.f, dO, C, v, ld, 0.f, dP, T);   // dP = dO v^T
        gemm(true, false, T, D, T, 1.f, Pv, T, dO, C, 0.f, dv, ld);  // dv = P^T dO
        if (probs_drop) drop_probs(dP, dP, T * T, drop_p, drop_key, (first_sample * H + bh) * T * T);
        softmax_backward_rows(dP, P, T, T);                             // dS = P * (dP - sum_j P dP)
        gemm(false, false, T, D, T, scale, dP, T, k, ld, 0.f, dq, ld);  // dq = scale dS k
        gemm(true, false, T, D, T, scale, dP, T, q, ld, 0.f, dk, ld);   // dk = scale dS^T q
        continue;
      }
      // The same in register blocks; without dropout dS comes straight from dP's registers.
      int64_t ldk = 0;
      const float* vT = transposed_keys(v, ld, T, D, &ldk);
      if (probs_drop) {
        head_scores(HeadScores::Store, T, T, D, 1.f, dO, C, vT, ldk, nullptr, nullptr, dP, T);
        drop_probs(dP, dP, T * T, drop_p, drop_key, (first_sample * H + bh) * T * T);
        softmax_backward_rows(dP, P, T, T);
      } else {
        head_scores(HeadScores::SoftmaxBackward, T, T, D, 1.f, dO, C, vT, ldk, nullptr, P, dP, T);
      }
      // B operands read row by row: contiguous copies for wide heads (see contiguous_rows).
      const bool copy = D >= kCopyRowsMinD;
      const float* dOb = copy ? contiguous_rows(kSlotDOut, dO, C, T, D) : dO;
      const float* kb = copy ? contiguous_rows(kSlotK, k, ld, T, D) : k;
      const float* qb = copy ? contiguous_rows(kSlotQ, q, ld, T, D) : q;
      const int64_t ldo = copy ? D : C, ldb = copy ? D : ld;
      head_product(T, D, T, 1.f, Pv, 1, T, dOb, ldo, dv, ld);   // dv = P^T dO
      head_product(T, D, T, scale, dP, T, 1, kb, ldb, dq, ld);  // dq = scale dS k
      head_product(T, D, T, scale, dP, 1, T, qb, ldb, dk, ld);  // dk = scale dS^T q
    }
  });
}

}  // namespace vit::cpu
