// Large products over narrow layers in AVX2 + FMA register blocks of our own, in place of
// oneDNN's sgemm (gemm.cpp's tiled_preferred says which shapes come here): the training
// products of the 192-wide models (cifar-seed, ViT-Ti), whose rows run to thousands.
//
// The register block is the packed linear's (avx2/linear_packed.cpp): 6 rows of A, each value
// broadcast, times one 16-column slice of B ([k][16], two vectors a k), 12 accumulators; over
// k chunks of 384. Alone, in L1, it runs close to the FMA peak, so what the loops around it
// add is the order in which the operands pass through the caches (docs/design.md, "Matrix
// products: oneDNN on x86-64, OpenBLAS on aarch64", for the measurements below):
// - A row-major (C = A B^T, the forward; C = A B, the input gradient): B is packed once per
//   call into slices of each k chunk (K x N floats, copied from the weights); the rows of A go
//   in groups of 48 (a group's chunk, 72 KiB, stays in L2), and within a group and chunk each
//   slice (24 KiB, in L1) meets the group's 8 register blocks in turn. A is read in place.
// - C = A^T B (the weight gradients) is not taken here: the training step was faster with
//   all three of cifar-seed's on oneDNN (gemm.cpp's gemm_wide_tn for qkv's and fc1's). The
//   A^T kernel that was here (C's tiles against 6-column panels of A read in place, the bias
//   gradient's column sums on the way) is at 30da30f.
// - Each block asks for the lines of C it will write next (prefetch for writing): oneDNN's sgemm
//   stalls on its stores to C lines out of cache (gemm_nt_bias, gemm.cpp). Each block also
//   pulls a share of the next pass's rows of A towards L2, and the last slice's blocks ask
//   for the next pass's first tiles of C, so that a group's first slice does not wait on
//   memory (per product: docs/history/benchmarks-2026-11.md, "AMD EPYC Zen 4 (AVX-512 with
//   BF16 and VNNI, on 256-bit units), 2026-11-28 and 29").
// - The linear layer's bias pass rides along: the forward starts its chains from the bias
//   instead of a pass seeding C with it.
// Taken, timed call against call with dnnl_sgemm inside cifar-seed's training step (2 shards
// of 8320 rows, each product on one thread): C = A B^T at N = 192 (K = 768, 192) and C = A B
// at N = 192 (K = 768, 576, 192). Not taken: N = 576 and 768 over K = 192, where oneDNN runs
// close to the peak.
//
// Every output is one fma chain over k in order, from zero (beta = 0), C (beta = 1) or beta C:
// whatever the blocking and the thread count, the bits of gemm_chain_reference (gemm.cpp).
#include <algorithm>
#include <cstring>

#include "backends/cpu/avx2/kernels.h"
#include "backends/cpu/avx2/simd.h"

namespace vit::cpu::avx2 {

namespace {
constexpr int64_t kRows = 6;        // rows of A per register block
constexpr int64_t kCols = 16;       // columns per register block and packed slice
constexpr int64_t kChunk = 384;     // k per pass
constexpr int64_t kGroupRows = 48;  // rows of A per group

// Where a block's chains start: on a later chunk from C (the chain so far); on the first from
// the bias (its 16 columns from the block's first, when not null; beta is 0 then), else from
// 0, C or beta C.
struct Start {
  bool first;
  float beta;
  const float* bias;
};

// C[R rows, 16 columns from c; n valid] = start + the sum over k < kc of A(r, k) b[k][:], with
// A(r, k) = a[r lda + k].
// b is a packed slice: [kc][16], 64-byte aligned, zeros past n. Then the lines of the block at
// `next` (R rows, stride ldc) are asked for, to be written.
template <int R, bool Full>
VIT_AVX2 void block(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc, int64_t n,
                    Start st, const float* next) {
  __m256i m[2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) m[j] = Full ? _mm256_set1_epi32(-1) : tail_mask(n - 8 * j);
  auto load_c = [&](const float* p, int j)
                    VIT_AVX2 { return Full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m[j]); };
  // Chains that do not read C start from the bias row, or from zero without one.
  const bool fresh = st.first && (st.bias || st.beta == 0.f);
  const __m256 vb = _mm256_set1_ps(st.beta);
  __m256 start[2];
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) start[j] = fresh && st.bias ? load_c(st.bias + 8 * j, j) : _mm256_setzero_ps();
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      if (fresh)
        acc[r][j] = start[j];
      else {
        const __m256 old = load_c(c + r * ldc + 8 * j, j);
        acc[r][j] = st.first && st.beta != 1.f ? _mm256_mul_ps(vb, old) : old;
      }
    }
  if (next)
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) __builtin_prefetch(next + r * ldc, 1, 3);
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b + kCols * k), b1 = _mm256_load_ps(b + kCols * k + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      float* out = c + r * ldc + 8 * j;
      if (Full)
        _mm256_storeu_ps(out, acc[r][j]);
      else
        _mm256_maskstore_ps(out, m[j], acc[r][j]);
    }
}

template <int R>
void block_rows(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc, int64_t n,
                Start st, const float* next) {
  if (n == kCols)
    block<R, true>(a, lda, b, kc, c, ldc, n, st, next);
  else
    block<R, false>(a, lda, b, kc, c, ldc, n, st, next);
}

// One register block of `rows` (1 to 6) rows.
void run_block(int64_t rows, const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc,
               int64_t n, Start st, const float* next) {
  switch (rows) {
    case 6: return block_rows<6>(a, lda, b, kc, c, ldc, n, st, next);
    case 5: return block_rows<5>(a, lda, b, kc, c, ldc, n, st, next);
    case 4: return block_rows<4>(a, lda, b, kc, c, ldc, n, st, next);
    case 3: return block_rows<3>(a, lda, b, kc, c, ldc, n, st, next);
    case 2: return block_rows<2>(a, lda, b, kc, c, ldc, n, st, next);
    default: return block_rows<1>(a, lda, b, kc, c, ldc, n, st, next);
  }
}

// Columns [j0, j0 + n) (n <= 16) of op(B) over k in [k0, k0 + kc) into a slice [kc][16], zeros
// past n. op(B)(k, j) = B[j ldb + k] when tb (a weight [N, K]), else B[k ldb + j].
void pack_slice(float* dst, const float* B, int64_t ldb, bool tb, int64_t k0, int64_t kc, int64_t j0,
                int64_t n) {
  if (n < kCols) std::memset(dst, 0, size_t(kc * kCols) * sizeof(float));
  if (tb)
    head_transpose(dst, kCols, B + j0 * ldb + k0, ldb, n, kc);  // [n, kc] -> [kc][16]
  else
    for (int64_t k = 0; k < kc; ++k)
      std::memcpy(dst + k * kCols, B + (k0 + k) * ldb + j0, size_t(n) * sizeof(float));
}

// C = A op(B) + beta C, or + bias (beta 0), A row-major [M, K].
void rows_product(bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float beta, const float* bias, float* C, int64_t ldc, int nt) {
  const int64_t slices = (N + kCols - 1) / kCols, chunks = (K + kChunk - 1) / kChunk;
  thread_local Scratch<float> buf;
  float* packed =
      grown(buf, chunks * slices * kChunk * kCols);  // chunk c, slice s at (c slices + s) kChunk 16
  for_items(chunks * slices, nt, [&](int64_t i) {
    const int64_t c = i / slices, s = i % slices, k0 = c * kChunk;
    pack_slice(packed + i * kChunk * kCols, B, ldb, tb, k0, std::min(kChunk, K - k0), s * kCols,
               std::min(kCols, N - s * kCols));
  });
  const int64_t groups = (M + kGroupRows - 1) / kGroupRows;
  for_items(groups, nt, [&](int64_t g) {
    const int64_t i0 = g * kGroupRows, i1 = std::min(M, i0 + kGroupRows);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t k0 = c * kChunk, kc = std::min(kChunk, K - k0);
      // The next pass (this group's next chunk, else the next group's first): its rows of A
      // are pulled towards L2 a few lines a block (its first slice would wait on them from
      // memory), and its first tile of C is asked for by this pass's last slice.
      const bool more = c + 1 < chunks;
      const int64_t pr0 = more ? i0 : i1, pr1 = more ? i1 : std::min(M, i1 + kGroupRows),
                    pk0 = more ? k0 + kChunk : 0, row_lines = (std::min(kChunk, K - pk0) + 15) / 16,
                    lines = (pr1 - pr0) * row_lines, blocks = slices * (kGroupRows / kRows),
                    per = (lines + blocks - 1) / blocks;
      int64_t line = 0;
      for (int64_t s = 0; s < slices; ++s) {
        const int64_t j0 = s * kCols, n = std::min(kCols, N - j0);
        const float* b = packed + (c * slices + s) * kChunk * kCols;
        for (int64_t i = i0; i < i1; i += kRows) {
          for (const int64_t end = std::min(lines, line + per); line < end; ++line)
            __builtin_prefetch(A + (pr0 + line / row_lines) * lda + pk0 + 16 * (line % row_lines), 0, 2);
          float* out = C + i * ldc + j0;
          // The next slice's tile of these rows: written a group's blocks later.
          const float* next = s + 1 < slices                ? out + kCols
                              : more                        ? C + i * ldc
                              : i + kGroupRows + kRows <= M ? C + (i + kGroupRows) * ldc
                                                            : nullptr;
          run_block(std::min(kRows, i1 - i), A + i * lda + k0, lda, b, kc, out, ldc, n,
                    Start{c == 0, beta, bias ? bias + j0 : nullptr}, next);
        }
      }
    }
  });
}

}  // namespace

void tiled_gemm(bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float beta, float* C, int64_t ldc, int nt, const float* bias) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // no chunk to start the chains: C = beta C or the bias
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = bias ? bias[j] : beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  rows_product(tb, M, N, K, A, lda, B, ldb, beta, bias, C, ldc, nt);
}

}  // namespace vit::cpu::avx2
