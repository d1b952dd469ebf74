// The packed small-batch linear's AVX-512 kernel (linear_packed.cpp packs the weights and
// dispatches here): 6 rows of x times one 64-wide panel (6 x 64 outputs in 24 registers) over
// k chunks of 768, reading x's rows where they are, while the next panel's weights are
// pulled into L2 (they come from memory once per call). Every output is one fma chain over
// k in order, whatever the thread count and whichever thread runs each chunk (SliceQueue).
// Declared in kernels.h.
#include <algorithm>

#include "backends/cpu/avx512/kernels.h"
#include "backends/cpu/avx512/simd.h"
#include "backends/cpu/linear_packed.h"

namespace vit::cpu::avx512 {

namespace {
constexpr int kRows = 6;         // rows of x per register block: 6 x 64 outputs in 24 registers
constexpr int64_t kChunk = 768;  // k per pass: x's slice (197 rows: 590 KB) stays in L2

// One register block's work: R rows of x (at x, leading dim ldx) times one panel (width w,
// rows of w floats, kPanel when Full) over kc values of k, into y's R x w outputs at c. The
// first chunk starts from the bias (or 0), later ones from what c holds, so each output is
// one fma chain over k in order; the last applies GELU if asked. Meanwhile pf_lines cache
// lines of the next weights from pf go to L2, one every pf_every values of k (the weights
// come from memory once per call). Passed by reference: a by-value struct this size is
// rebuilt on the stack per call, and reading it back stalled on store forwarding.
struct Tile {
  const float* x;
  int64_t ldx;
  const float* B;
  int64_t w, kc;
  __mmask16 m[4];
  bool first, last, gelu;
  const float* bias;
  float* c;
  int64_t ldc;
  const char* pf;
  int64_t pf_lines, pf_every;
};

template <int R, bool Full>
VIT_AVX512 void block(const Tile& t) {
  const float* x = t.x;
  const float* B = t.B;
  const int64_t ldx = t.ldx, kc = t.kc, ldb = Full ? kPanel : t.w;
  __mmask16 m[4];
  for (int j = 0; j < 4; ++j) m[j] = Full ? __mmask16(0xffff) : t.m[j];
  __m512 acc[R][4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 b0 = t.first && t.bias ? _mm512_maskz_loadu_ps(m[j], t.bias + 16 * j) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
      acc[r][j] = t.first ? b0 : _mm512_maskz_loadu_ps(m[j], t.c + r * t.ldc + 16 * j);
  }
  const char* pf = t.pf;
  int64_t pf_lines = t.pf_lines, due = 0;
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    if (k == due && pf_lines > 0) {
      _mm_prefetch(pf, _MM_HINT_T1);
      pf += 64, --pf_lines, due += t.pf_every;
    }
    __m512 v[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      v[j] = Full ? _mm512_loadu_ps(B + k * ldb + 16 * j) : _mm512_maskz_loadu_ps(m[j], B + k * ldb + 16 * j);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(a, v[j], acc[r][j]);
    }
  }
  const bool gelu = t.last && t.gelu;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 out = gelu ? simd::gelu512(acc[r][j]) : acc[r][j];
      if (Full)
        _mm512_storeu_ps(t.c + r * t.ldc + 16 * j, out);
      else
        _mm512_mask_storeu_ps(t.c + r * t.ldc + 16 * j, m[j], out);
    }
}

template <bool Full>
VIT_AVX512 void rows_block(int rows, const Tile& t) {
  switch (rows) {
    case 6: return block<6, Full>(t);
    case 5: return block<5, Full>(t);
    case 4: return block<4, Full>(t);
    case 3: return block<3, Full>(t);
    case 2: return block<2, Full>(t);
    default: return block<1, Full>(t);
  }
}

}  // namespace

// The threads take slices (k chunk, panel, row blocks) as they ask (for_each_slice:
// SliceQueue), and pull the next slice's weights into L2 in even shares across the current
// slice's row blocks, a line every so many values of k.
VIT_AVX512 void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M,
                                      int64_t K, int64_t N, bool gelu) {
  auto run = [&](const PackedSlice& s, const PackedWalk::Lines& next) VIT_AVX512 {
    const int64_t r0 = s.share.r0, r1 = s.share.r1;
    const int64_t k0 = s.k0, kc = s.kc, n0 = s.n0, w = s.w;
    const float* P = wp + n0 * K;  // panel p: [K][w]
    Tile tile{};
    tile.ldx = K, tile.w = w, tile.kc = kc, tile.ldc = N;
    for (int j = 0; j < 4; ++j) tile.m[j] = simd::lanes(w - 16 * j);
    tile.first = k0 == 0, tile.last = k0 + kc == K, tile.gelu = gelu;
    tile.bias = b ? b + n0 : nullptr;
    tile.B = P + k0 * w;
    const int64_t lines = next.lines, blocks = r1 - r0;  // whole panels: one contiguous piece
    const int64_t share = (lines + blocks - 1) / std::max<int64_t>(blocks, 1);
    for (int64_t rb = r0; rb < r1; ++rb) {
      const int64_t done = share * (rb - r0);
      tile.pf_lines = done < lines ? std::min(share, lines - done) : 0;  // lines = 0 without next
      if (tile.pf_lines > 0) {
        tile.pf = next.line(done);
        tile.pf_every = std::max<int64_t>(kc / tile.pf_lines, 1);
      }
      tile.x = x + rb * kRows * K + k0;
      tile.c = y + rb * kRows * N + n0;
      const int rows = int(std::min<int64_t>(kRows, M - rb * kRows));
      if (w == kPanel)
        rows_block<true>(rows, tile);
      else
        rows_block<false>(rows, tile);
    }
  };
  for_each_slice(M, K, N, kRows, kChunk, wp, kPanel, run);
}

}  // namespace vit::cpu::avx512
