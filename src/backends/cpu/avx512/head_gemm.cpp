// Attention's per-head products (T x T x D, D = 4 ... 80) with AVX-512 register blocks,
// no library call: at cifar-seed's shape (T = 65, D = 16, 3,072 heads a batch) a oneDNN call
// per product plus a separate softmax pass cost more than the arithmetic (docs/design.md,
// "Matrix products: oneDNN on x86-64, OpenBLAS on aarch64").
//   head_gemm:   C = alpha A B, A read through strides (rows, k), so P^T dO and dS^T q need
//                no transpose of P or dS;
//   head_scores: S = alpha q k^T on k transposed once (head_transpose), with the row
//                softmax (or its backward) applied while S is still in registers.
// The reference is gemm() plus softmax_rows (oneDNN); tests/ops/test_simd.cpp compares them.
// Declared in kernels.h; callers check isa() (attention.cpp, gemm.cpp).
#include <algorithm>
#include <limits>

#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/cpu.h"

namespace vit::cpu::avx512 {

namespace {
using simd::lanes;

// c[R][NV] = A B over k < K with A(r, k) = A[r ars + k aks] and B's vectors read under
// masks m. Rows past `rows` read row 0. One vector of B at a time: R x NV accumulators, R
// broadcasts and 1 vector stay in registers (loading all NV first spilled at NV = 13).
//
// A full block addresses its rows from one base pointer per 3 rows, as base, base + ars and
// base + 2 ars (x86's scaled index), the bases stepping by aks: R row pointers of their own
// (12 for one vector of columns) did not fit in the 16 general registers, and reloading
// spilled ones inside the k loop cost more than the FMAs.
template <int R, int NV>
VIT_AVX512 inline void accumulate(__m512 (&c)[R][NV], int rows, int64_t K, const float* A, int64_t ars,
                                  int64_t aks, const float* B, int64_t ldb, const __mmask16* m) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) c[r][v] = _mm512_setzero_ps();
  if (rows == R) {
    constexpr int Q = (R + 2) / 3;
    const float* base[Q];
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) base[q] = A + 3 * q * ars;
    const float* b = B;
    for (int64_t k = 0; k < K; ++k) {
      __m512 x[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) x[r] = _mm512_set1_ps(base[r / 3][(r % 3) * ars]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        const __m512 bv = _mm512_maskz_loadu_ps(m[v], b + 16 * v);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) c[r][v] = _mm512_fmadd_ps(x[r], bv, c[r][v]);
      }
#pragma GCC unroll 8
      for (int q = 0; q < Q; ++q) base[q] += aks;
      b += ldb;
    }
    return;
  }
  const float* a[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) a[r] = A + (r < rows ? r : 0) * ars;
  for (int64_t k = 0; k < K; ++k) {
    __m512 x[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) x[r] = _mm512_set1_ps(a[r][k * aks]);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const __m512 b = _mm512_maskz_loadu_ps(m[v], B + k * ldb + 16 * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) c[r][v] = _mm512_fmadd_ps(x[r], b, c[r][v]);
    }
  }
}

// C[R rows, NV vectors] = alpha A B + beta C + bias; rows past `rows` are not stored,
// columns past N masked. beta = 0 does not read C; bias (N floats, one per column) may be
// null. Adding the bias here rather than seeding C with it first saves a pass and the
// stall of reading back, under a mask, what a masked store just wrote (no store forwarding).
template <int R, int NV>
VIT_AVX512 void gemm_block(int rows, int64_t N, int64_t K, float alpha, const float* A, int64_t ars,
                           int64_t aks, const float* B, int64_t ldb, float beta, const float* bias, float* C,
                           int64_t ldc) {
  __mmask16 m[NV];
  __m512 c[R][NV], vbias[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    m[v] = lanes(N - 16 * v);
    vbias[v] = bias ? _mm512_maskz_loadu_ps(m[v], bias + 16 * v) : _mm512_setzero_ps();
  }
  accumulate<R, NV>(c, rows, K, A, ars, aks, B, ldb, m);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    if (r < rows)
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        float* out = C + r * ldc + 16 * v;
        __m512 y = _mm512_fmadd_ps(c[r][v], va, vbias[v]);
        if (beta != 0.f) y = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m[v], out), y);
        _mm512_mask_storeu_ps(out, m[v], y);
      }
}

// All rows for columns [n0, n0 + 16 NV): R rows per block, R x NV accumulators <= 24.
template <int NV>
void gemm_columns(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
                  const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  constexpr int R = NV == 1 ? 12 : NV == 2 ? 8 : 6;
  for (int64_t i = 0; i < M; i += R)
    gemm_block<R, NV>(int(M - i < R ? M - i : R), N, K, alpha, A + i * ars, ars, aks, B, ldb, beta, bias,
                      C + i * ldc, ldc);
}

enum class Epilogue { Store, Softmax, SoftmaxBackward };

// S rows [0, rows) of a block of R, columns [0, 16 NV) = alpha q kT with kT [K, ldk], then
// written in the `range` lanes of each vector (the columns < T):
// Store: S as is; Softmax: P = softmax(S) over the `valid` lanes (range and unmasked keys;
// the others become 0), a row with none valid becomes 0; SoftmaxBackward: dS = P (S - sum_j
// P S) with P read from `P` (same layout as C).
template <int R, int NV, Epilogue E>
VIT_AVX512 void scores_block(int rows, int64_t K, float alpha, const float* q, int64_t ldq, const float* kT,
                             int64_t ldk, const __mmask16* range, const __mmask16* valid, const float* P,
                             float* C, int64_t ldc) {
  __m512 c[R][NV];
  accumulate<R, NV>(c, rows, K, q, ldq, 1, kT, ldk, range);  // lanes past T read as 0
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    if (r >= rows) continue;
    float* out = C + r * ldc;
    if constexpr (E == Epilogue::Store) {
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + 16 * v, range[v], _mm512_mul_ps(c[r][v], va));
    } else if constexpr (E == Epilogue::Softmax) {
      __m512 mx = ninf;
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        c[r][v] = _mm512_mask_mul_ps(ninf, valid[v], c[r][v], va);
        mx = _mm512_max_ps(mx, c[r][v]);
      }
      const float rmax = simd::hmax(mx);
      if (rmax == -std::numeric_limits<float>::infinity()) {  // every key masked
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + 16 * v, range[v], _mm512_setzero_ps());
        continue;
      }
      const __m512 vmax = _mm512_set1_ps(rmax);
      __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        c[r][v] = simd::exp512_nonpos(_mm512_sub_ps(c[r][v], vmax));  // exp(-inf) = 0
        sum = _mm512_add_ps(sum, c[r][v]);
      }
      const __m512 inv = _mm512_set1_ps(1.f / simd::hsum(sum));
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out + 16 * v, range[v], _mm512_mul_ps(c[r][v], inv));
    } else {
      const float* p = P + r * ldc;
      __m512 dot = _mm512_setzero_ps();
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        c[r][v] = _mm512_maskz_mul_ps(range[v], c[r][v], va);  // lanes past T: 0, whatever kT holds
        dot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(range[v], p + 16 * v), c[r][v], dot);
      }
      const __m512 vdot = _mm512_set1_ps(simd::hsum(dot));
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v)
        _mm512_mask_storeu_ps(
            out + 16 * v, range[v],
            _mm512_mul_ps(_mm512_maskz_loadu_ps(range[v], p + 16 * v), _mm512_sub_ps(c[r][v], vdot)));
    }
  }
}

// Rows per block for NV vectors of columns: R x NV accumulators <= 24.
constexpr int scores_rows(int NV) {
  return NV <= 4 ? 6 : 4;
}

template <int NV, Epilogue E>
void scores_rows_nv(int64_t M, int64_t K, float alpha, const float* q, int64_t ldq, const float* kT,
                    int64_t ldk, const __mmask16* range, const __mmask16* valid, const float* P, float* C,
                    int64_t ldc) {
  constexpr int R = scores_rows(NV);
  for (int64_t i = 0; i < M; i += R)
    scores_block<R, NV, E>(int(M - i < R ? M - i : R), K, alpha, q + i * ldq, ldq, kT, ldk, range, valid,
                           P ? P + i * ldc : nullptr, C + i * ldc, ldc);
}

// A softmax in registers needs the whole row there: up to kMaxNV vectors (96 keys; cifar-
// seed's 65, the MNIST models' 50), with kT small enough to stay in L1 across row blocks.
// Wider rows (ViT-B/16's 197) go in chunks of kChunkNV vectors, whose kT slice stays in L1,
// are stored, and then pass through the row kernels, rather than whole rows in registers
// streaming all of kT from L2 for every two rows (docs/design.md, "Matrix products: oneDNN on
// x86-64, OpenBLAS on aarch64").
constexpr int kMaxNV = 6, kChunkNV = 4;
constexpr int64_t kFusedKTBytes = 24 << 10;

template <Epilogue E, int NV = 1>
void scores_dispatch(int nv, int64_t M, int64_t K, float alpha, const float* q, int64_t ldq, const float* kT,
                     int64_t ldk, const __mmask16* range, const __mmask16* valid, const float* P, float* C,
                     int64_t ldc) {
  if constexpr (NV <= kMaxNV) {
    if (nv == NV) return scores_rows_nv<NV, E>(M, K, alpha, q, ldq, kT, ldk, range, valid, P, C, ldc);
    return scores_dispatch<E, NV + 1>(nv, M, K, alpha, q, ldq, kT, ldk, range, valid, P, C, ldc);
  }
}

// 16 x 16 floats: rows of src (stride lds, `rows` <= 16 of them, `cols` <= 16 valid) to
// columns of dst (stride ldd); dst rows past `cols` are not written.
VIT_AVX512 void transpose16(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows,
                            int64_t cols) {
  __m512 r[16];
  simd::load_rows16(r, src, lds, rows, cols);
  simd::transpose16x16(r);  // r[j] now holds column j of the block
  simd::store_rows16(dst, ldd, r, cols, rows);
}
}  // namespace

void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float beta, const float* bias, float* C, int64_t ldc) {
  // Columns in chunks of up to 4 vectors, the last chunk as wide as what is left.
  for (int64_t n0 = 0; n0 < N; n0 += 64) {
    const int64_t n = N - n0 < 64 ? N - n0 : 64;
    const float* b = B + n0;
    const float* bs = bias ? bias + n0 : nullptr;
    float* c = C + n0;
    switch ((n + 15) / 16) {
      case 1: gemm_columns<1>(M, n, K, alpha, A, ars, aks, b, ldb, beta, bs, c, ldc); break;
      case 2: gemm_columns<2>(M, n, K, alpha, A, ars, aks, b, ldb, beta, bs, c, ldc); break;
      case 3: gemm_columns<3>(M, n, K, alpha, A, ars, aks, b, ldb, beta, bs, c, ldc); break;
      default: gemm_columns<4>(M, n, K, alpha, A, ars, aks, b, ldb, beta, bs, c, ldc); break;
    }
  }
}

void head_gemm(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t ars, int64_t aks,
               const float* B, int64_t ldb, float* C, int64_t ldc) {
  head_gemm(M, N, K, alpha, A, ars, aks, B, ldb, 0.f, nullptr, C, ldc);
}

void head_gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc) {
  head_gemm(M, N, K, alpha, A, lda, 1, B, ldb, 0.f, nullptr, C, ldc);
}

namespace {
// Lane l of v[k] holds 4 consecutive floats; afterwards lane l of v[d] holds float d of
// lane l of v[0..3] (a 4 x 4 transpose inside each 128-bit lane). Its own inverse.
VIT_AVX512 inline void transpose4_in_lanes(__m512 (&v)[4]) {
  const __m512 t0 = _mm512_unpacklo_ps(v[0], v[1]), t1 = _mm512_unpackhi_ps(v[0], v[1]);
  const __m512 t2 = _mm512_unpacklo_ps(v[2], v[3]), t3 = _mm512_unpackhi_ps(v[2], v[3]);
  v[0] = _mm512_shuffle_ps(t0, t2, 0x44), v[1] = _mm512_shuffle_ps(t0, t2, 0xEE);
  v[2] = _mm512_shuffle_ps(t1, t3, 0x44), v[3] = _mm512_shuffle_ps(t1, t3, 0xEE);
}

// Element 4k + l <-> element 4l + k: between "lane l, slot k" and row order. Its own inverse.
VIT_AVX512 inline __m512i lane_slot_order() {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// src[rows <= 16, cols <= 4] to dst[cols, rows]: a narrow head's k or v (D = 4) to k^T.
// 4 rows per vector (one per 128-bit lane), a 4 x 4 transpose in the lanes and a
// permutation, against transpose16's 16 loads and 64 shuffles for 4 useful columns.
VIT_AVX512 void transpose_to_narrow_rows(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows,
                                         int64_t cols) {
  const __mmask8 mc = __mmask8((1u << cols) - 1u);
  __m512 v[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    auto row = [&](int l) VIT_AVX512 {
      const int64_t r = 4 * k + l;
      return r < rows ? _mm_maskz_loadu_ps(mc, src + r * lds) : _mm_setzero_ps();
    };
    v[k] = _mm512_insertf32x4(_mm512_castps128_ps512(row(0)), row(1), 1);
    v[k] = _mm512_insertf32x4(v[k], row(2), 2);
    v[k] = _mm512_insertf32x4(v[k], row(3), 3);
  }
  transpose4_in_lanes(v);
  const __mmask16 mr = lanes(rows);
  for (int64_t d = 0; d < cols; ++d)
    _mm512_mask_storeu_ps(dst + d * ldd, mr, _mm512_permutexvar_ps(lane_slot_order(), v[d]));
}

// src[rows <= 4, cols <= 16] to dst[cols, rows]: a narrow head's output C^T [D, M] back to C.
VIT_AVX512 void transpose_from_narrow_rows(float* dst, int64_t ldd, const float* src, int64_t lds,
                                           int64_t rows, int64_t cols) {
  const __mmask16 mc = lanes(cols);
  __m512 v[4];
#pragma GCC unroll 4
  for (int d = 0; d < 4; ++d)
    v[d] = d < rows ? _mm512_permutexvar_ps(lane_slot_order(), _mm512_maskz_loadu_ps(mc, src + d * lds))
                    : _mm512_setzero_ps();
  transpose4_in_lanes(v);  // lane l of v[k]: dst row 4k + l
  const __mmask8 mr = __mmask8((1u << rows) - 1u);
  auto put = [&](int64_t r, __m128 x) VIT_AVX512 {
    if (r < cols) _mm_mask_storeu_ps(dst + r * ldd, mr, x);
  };
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    put(4 * k, _mm512_castps512_ps128(v[k]));
    put(4 * k + 1, _mm512_extractf32x4_ps(v[k], 1));
    put(4 * k + 2, _mm512_extractf32x4_ps(v[k], 2));
    put(4 * k + 3, _mm512_extractf32x4_ps(v[k], 3));
  }
}
}  // namespace

VIT_AVX512 void head_transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows,
                               int64_t cols) {
  // Blocks of 16 x 16; one with at most 4 columns or 4 rows (a narrow head's k or output,
  // or the last rows of T = 50 keys) takes the narrow forms.
  for (int64_t i = 0; i < rows; i += 16)
    for (int64_t j = 0; j < cols; j += 16) {
      const int64_t r = std::min<int64_t>(16, rows - i), c = std::min<int64_t>(16, cols - j);
      float* d = dst + j * ldd + i;
      const float* s = src + i * lds + j;
      if (c <= 4)
        transpose_to_narrow_rows(d, ldd, s, lds, r, c);
      else if (r <= 4)
        transpose_from_narrow_rows(d, ldd, s, lds, r, c);
      else
        transpose16(d, ldd, s, lds, r, c);
    }
}

VIT_AVX512 void head_scores(HeadScores mode, int64_t M, int64_t T, int64_t D, float alpha, const float* q,
                            int64_t ldq, const float* kT, int64_t ldk, const uint8_t* km, const float* P,
                            float* C, int64_t ldc) {
  const bool fused = (T + 15) / 16 <= kMaxNV && D * ldk * int64_t(sizeof(float)) <= kFusedKTBytes;
  const Epilogue e = !fused || mode == HeadScores::Store ? Epilogue::Store
                     : mode == HeadScores::Softmax       ? Epilogue::Softmax
                                                         : Epilogue::SoftmaxBackward;
  const int chunk = fused ? kMaxNV : kChunkNV;
  __mmask16 range[kMaxNV], valid[kMaxNV];
  for (int64_t j0 = 0; j0 < T; j0 += 16 * chunk) {
    const int nv = int(std::min<int64_t>(chunk, (T - j0 + 15) / 16));
    for (int v = 0; v < nv; ++v) {
      const int64_t j = j0 + 16 * v;
      range[v] = valid[v] = lanes(T - j);
      if (km)
        for (int l = 0; l < 16 && j + l < T; ++l)
          if (!km[j + l]) valid[v] = __mmask16(valid[v] & ~(1u << l));
    }
    const float* p = P ? P + j0 : nullptr;
    const float* kt = kT + j0;
    if (e == Epilogue::Softmax)
      scores_dispatch<Epilogue::Softmax>(nv, M, D, alpha, q, ldq, kt, ldk, range, valid, p, C + j0, ldc);
    else if (e == Epilogue::SoftmaxBackward)
      scores_dispatch<Epilogue::SoftmaxBackward>(nv, M, D, alpha, q, ldq, kt, ldk, range, valid, p, C + j0,
                                                 ldc);
    else
      scores_dispatch<Epilogue::Store>(nv, M, D, alpha, q, ldq, kt, ldk, range, valid, p, C + j0, ldc);
  }
  if (!fused && mode == HeadScores::Softmax) softmax_rows(C, M, T, km);
  if (!fused && mode == HeadScores::SoftmaxBackward) softmax_backward_rows(C, P, M, T);
}

}  // namespace vit::cpu::avx512
