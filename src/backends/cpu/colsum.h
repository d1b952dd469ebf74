// Column sums in one fixed order, shared by colsum_add (the linear layer's bias gradient)
// and the passes that produce that gradient's input anyway (GELU's backward), so a fused
// pass gives the same bits as the op followed by colsum_add.
#pragma once
#include <vector>

#include "backends/cpu/simd.h"

namespace vit::cpu {

// db[j] += sum over rows i of row(i, j) for columns [j0, j1), 8 vectors at a time in
// registers, every row in order. row(i, c, m) returns the 16 values at row i, columns
// [c, c + 16) under mask m (lanes past j1 are masked off and must read as 0); it may store
// them too.
template <typename Row>
VIT_AVX512 inline void colsum_columns(float* db, int64_t M, int64_t j0, int64_t j1, Row&& row) {
  constexpr int kV = 8;
  for (int64_t c0 = j0; c0 < j1; c0 += 16 * kV) {
    __m512 acc[kV];
    __mmask16 m[kV];
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) {
      m[v] = simd::lanes(j1 - c0 - 16 * v);
      acc[v] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < M; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < kV; ++v)
        if (m[v]) acc[v] = _mm512_add_ps(acc[v], row(i, c0 + 16 * v, m[v]));
#pragma GCC unroll 8
    for (int v = 0; v < kV; ++v) {
      float* d = db + c0 + 16 * v;
      _mm512_mask_storeu_ps(d, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], d), acc[v]));
    }
  }
}

// The same sums (the same bits: each column still adds its rows in order, from 0, then
// into db) walking the rows in order, the partial sums in a per-thread buffer: for a `row`
// that computes what it returns from other matrices, which then stream row by row
// instead of in strided 512-byte pieces.
template <typename Row>
VIT_AVX512 inline void colsum_by_rows(float* db, int64_t M, int64_t j0, int64_t j1, Row&& row) {
  thread_local std::vector<float> buf;
  const int64_t n = j1 - j0;
  if (int64_t(buf.size()) < n) buf.resize(size_t(n));
  float* acc = buf.data();
  for (int64_t j = 0; j < n; j += 16) _mm512_mask_storeu_ps(acc + j, simd::lanes(n - j), _mm512_setzero_ps());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = simd::lanes(n - j);
      _mm512_mask_storeu_ps(acc + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + j), row(i, j0 + j, m)));
    }
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = simd::lanes(n - j);
    float* d = db + j0 + j;
    _mm512_mask_storeu_ps(d, m,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(m, d), _mm512_maskz_loadu_ps(m, acc + j)));
  }
}

// Matrices of at most this many columns sum in row phases instead (linear.cpp's
// colsum_narrow), whatever a thread's block of columns.
constexpr int64_t kColsumNarrowN = 64;

}  // namespace vit::cpu
