// Column sums in colsum_add's order (linear.cpp) for the passes that produce the bias
// gradient's input anyway (GELU's backward), so a fused pass gives the same bits as the
// pass followed by colsum_add.
#pragma once
#include <vector>

#include "backends/cpu/simd.h"

namespace vit::cpu {

// db[j] += sum over rows i of row(i, j) for columns [j0, j1): each column adds its rows in
// order from 0, then into db, as colsum_add's column blocks do (the same bits), but walking
// the rows in order with the partial sums in a per-thread buffer, so that the matrices
// `row` reads stream row by row instead of in strided pieces. row(i, c, m) returns the 16
// values at row i, columns [c, c + 16) under mask m (it may store them too).
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
