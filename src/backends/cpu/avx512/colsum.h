// Column sums in colsum_add's order (avx512/colsum.cpp) for the passes that produce the
// bias gradient's input anyway (GELU's backward), so a fused pass gives the same bits as the
// pass followed by colsum_add. AVX-512 only (x86-64 builds); callers check isa().
#pragma once
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/cpu.h"

namespace vit::cpu::avx512 {

// db[j] += sum over rows i of row(i, j) for columns [j0, j1): each column adds its rows in
// order from 0, then into db, as colsum_add's column blocks do (the same bits), but walking
// the rows in order with the partial sums in a per-thread buffer, so that the matrices
// `row` reads stream row by row instead of in strided pieces. row(i, c, m) returns the 16
// values at row i, columns [c, c + 16) under mask m (it may store them too).
template <typename Row>
VIT_AVX512 inline void colsum_by_rows(float* db, int64_t M, int64_t j0, int64_t j1, Row&& row) {
  thread_local Scratch<float> buf;
  const int64_t n = j1 - j0;
  float* acc = grown(buf, n);
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

// Matrices of at most this many columns sum in row phases instead (colsum_narrow_by_rows),
// whatever a thread's block of columns.
constexpr int64_t kColsumNarrowN = 64;

// db[j] += the sum over rows of row(i, j) for columns [j0, j1) of at most NV vectors
// (mnist-seed's rows of 8 to 32 floats): with one accumulator per vector every row's add
// waits on the previous one (4 cycles), so rows go in turn to 4 accumulators, summed at the
// end. The order depends on M and N only. row(i, c, m) as in colsum_by_rows.
template <int NV, typename Row>
VIT_AVX512 inline void colsum_narrow_by_rows(float* db, int64_t M, int64_t j0, int64_t j1, Row&& row) {
  constexpr int kPhases = 4;
  __m512 acc[kPhases][NV];
  __mmask16 m[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    m[v] = simd::lanes(j1 - j0 - 16 * v);
#pragma GCC unroll 4
    for (int p = 0; p < kPhases; ++p) acc[p][v] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + kPhases <= M; i += kPhases)
#pragma GCC unroll 4
    for (int p = 0; p < kPhases; ++p)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[p][v] = _mm512_add_ps(acc[p][v], row(i + p, j0 + 16 * v, m[v]));
  for (; i < M; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[0][v] = _mm512_add_ps(acc[0][v], row(i, j0 + 16 * v, m[v]));
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[0][v], acc[1][v]), _mm512_add_ps(acc[2][v], acc[3][v]));
    float* d = db + j0 + 16 * v;
    _mm512_mask_storeu_ps(d, m[v], _mm512_add_ps(_mm512_maskz_loadu_ps(m[v], d), sum));
  }
}

}  // namespace vit::cpu::avx512
