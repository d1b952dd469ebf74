// Inference linear on weights packed in place: y = x w^T + b for few rows (batch-1 ViTs:
// 197 token rows). oneDNN's sgemm repacks w at every call and splits small products poorly
// over two threads; here w is packed once, in the memory it occupies (no second copy), in
// one of two layouts, chosen per shape:
//
// - oneDNN's: the blocked layout its matmul primitive (brgemm) asks for, when that layout
//   takes exactly N x K floats (every ViT width, multiples of 16). On an Intel Xeon with
//   AVX-512 it ran ViT-B/16's batch-1 products at 209-222 GFLOP/s on one core, against
//   160-189 for the panels below and 172-199 for sgemm (docs/benchmarks.md).
// - panels: panel p holds rows [16p, 16p + w) of w[N,K] (w = 16, or the rows left at the
//   end) transposed to [K, w]; an AVX-512 kernel of our own, 12 x 32 register blocks over k
//   chunks that stay in L1. Every output is summed over k in order by one thread, whatever
//   the thread count. For the shapes oneDNN would pad, and with VIT_PACK=panels.

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backends/cpu/cpu.h"
#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/simd.h"
#include "vit/core/threads.h"

namespace vit::cpu {

namespace {
constexpr int64_t kPanel = 16;           // output columns per panel (one AVX-512 vector)
constexpr int kRows = 12;                // rows of x per register block: 12 x 32 outputs in 24 registers
constexpr int64_t kChunk = 192;          // k per pass: a pair of panels' slice (24 KB) stays in L1
constexpr int64_t kPreferredRows = 800;  // see packed_linear_preferred

inline int64_t panel_width(int64_t N, int64_t n0) {
  return N - n0 < kPanel ? N - n0 : kPanel;
}

// R rows (of `rows` <= R that are stored) times the columns [n0, n0 + 32) of y, over kc
// values of k: x's rows come packed as [kc][kRows] (pa), panels B0 (width w0) and B1
// (width w1; m1 = 0 when there is none). The first chunk starts from the bias (or 0),
// later ones from what C holds, so each output is still one fma chain over k in order.
template <int R>
VIT_AVX512 void block(int rows, int64_t kc, const float* pa, const float* B0, int64_t w0, __mmask16 m0,
                      const float* B1, int64_t w1, __mmask16 m1, bool first, const float* bias, float* C,
                      int64_t ldc) {
  __m512 c[R][2];
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (first) {
      c[r][0] = b0, c[r][1] = b1;
    } else {  // rows past `rows` are never stored: any finite start will do
      const int rr = r < rows ? r : 0;
      c[r][0] = _mm512_maskz_loadu_ps(m0, C + rr * ldc);
      c[r][1] = _mm512_maskz_loadu_ps(m1, C + rr * ldc + 16);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, B0 + k * w0);
    const __m512 v1 = _mm512_maskz_loadu_ps(m1, B1 + k * w1);
    const float* a = pa + k * kRows;
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r]);
      c[r][0] = _mm512_fmadd_ps(x, v0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(x, v1, c[r][1]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
    if (r < rows) {
      _mm512_mask_storeu_ps(C + r * ldc, m0, c[r][0]);
      _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c[r][1]);
    }
}

// x's rows packed for the register blocks: row block b as [K][kRows] at pa + b * kRows * K,
// rows past M zero. One buffer per calling thread, shared with its team, grown never shrunk.
float* packed_rows(int64_t M, int64_t K) {
  static thread_local std::vector<float> buf;
  const size_t n = size_t((M + kRows - 1) / kRows * kRows * K);
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Pulls the next chunk's slice of both panels into L2 while the current one is computed:
// a share of its lines before each row block (the weights come from memory once per call).
inline void prefetch_share(const float* p, int64_t floats, int64_t part, int64_t parts) {
  const int64_t lines = (floats + 15) / 16, l0 = lines * part / parts, l1 = lines * (part + 1) / parts;
  for (int64_t l = l0; l < l1; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + 16 * l), _MM_HINT_T1);
}

// Threads split the panel pairs; each runs, per pair, the k chunks in order and under each
// chunk every row block, so the chunk's 2 x kChunk x 16 weights stay in L1 across the rows.
VIT_AVX512 void forward_avx512(float* y, const float* x, const float* wp, const float* b, int64_t M,
                               int64_t K, int64_t N) {
  const int64_t pairs = (N + 2 * kPanel - 1) / (2 * kPanel), nb = (M + kRows - 1) / kRows;
  const int nt = std::min<int64_t>(threads_for(M * N * K / 16), pairs);
  float* pa = packed_rows(M, K);
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static)
    for (int64_t rb = 0; rb < nb; ++rb) {
      const int64_t i0 = rb * kRows, rows = std::min<int64_t>(kRows, M - i0);
      float* dst = pa + rb * kRows * K;
      if (rows < kRows) std::fill(dst, dst + kRows * K, 0.f);
      head_transpose(dst, kRows, x + i0 * K, K, rows, K);
    }  // (the loop's barrier: every row block is packed before any is read)
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t p_end = pairs * (t + 1) / T;
    for (int64_t p = pairs * t / T; p < p_end; ++p) {
      const int64_t n0 = p * 2 * kPanel, w0 = panel_width(N, n0);
      const int64_t w1 = n0 + kPanel < N ? panel_width(N, n0 + kPanel) : 0;
      const __mmask16 m0 = simd::lanes(w0), m1 = simd::lanes(w1);  // m1 = 0 when w1 = 0
      const float* P0 = wp + n0 * K;
      const float* P1 = w1 ? P0 + w0 * K : P0;  // no second panel: a harmless stream, masked off
      const float* bias = b ? b + n0 : nullptr;
      for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
        const int64_t kc = std::min(kChunk, K - k0);
        // The next chunk, in both panels: this pair's, or the next pair's first (full width:
        // only the last pair can be narrower, and it has no next).
        const float *next0 = nullptr, *next1 = nullptr;
        int64_t floats0 = 0, floats1 = 0;
        if (k0 + kc < K) {
          const int64_t kn = std::min(kChunk, K - k0 - kc);
          next0 = P0 + (k0 + kc) * w0, floats0 = kn * w0;
          next1 = P1 + (k0 + kc) * w1, floats1 = kn * w1;
        } else if (p + 1 < p_end) {
          next0 = P0 + (w0 + w1) * K, floats0 = std::min(kChunk, K) * kPanel;
          next1 = next0 + kPanel * K, floats1 = n0 + 3 * kPanel < N ? floats0 : 0;
        }
        for (int64_t rb = 0; rb < nb; ++rb) {
          if (next0) {
            prefetch_share(next0, floats0, rb, nb);
            prefetch_share(next1, floats1, rb, nb);
          }
          const int rows = int(std::min<int64_t>(kRows, M - rb * kRows));
          const float* a = pa + rb * kRows * K + k0 * kRows;
          float* c = y + rb * kRows * N + n0;
          if (rows > 8)
            block<12>(rows, kc, a, P0 + k0 * w0, w0, m0, P1 + k0 * w1, w1, m1, k0 == 0, bias, c, N);
          else if (rows > 4)
            block<8>(rows, kc, a, P0 + k0 * w0, w0, m0, P1 + k0 * w1, w1, m1, k0 == 0, bias, c, N);
          else
            block<4>(rows, kc, a, P0 + k0 * w0, w0, m0, P1 + k0 * w1, w1, m1, k0 == 0, bias, c, N);
        }
      }
    }
  }
}

// The same products in plain loops (k in order, as above): where AVX-512 is missing.
void forward_plain(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                   int64_t N) {
#pragma omp parallel for num_threads(threads_for(M* N* K / 16)) schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n0 = 0; n0 < N; n0 += kPanel) {
      const int64_t w = panel_width(N, n0);
      const float* P = wp + n0 * K;
      for (int64_t j = 0; j < w; ++j) {
        float s = b ? b[n0 + j] : 0.f;
        for (int64_t k = 0; k < K; ++k) s += x[i * K + k] * P[k * w + j];
        y[i * N + n0 + j] = s;
      }
    }
}
}  // namespace

bool packed_linear_preferred(int64_t M) {
  if (const char* env = std::getenv("VIT_PACK"); env && *env) {
    if (std::strcmp(env, "off") == 0) return false;
    if (std::strcmp(env, "on") == 0 || std::strcmp(env, "panels") == 0) return true;
  }
  // Measured on whole models (docs/benchmarks.md): ahead of oneDNN's sgemm up to about 800
  // rows (batch 4 at 197 tokens) on two threads and on one, on an AMD Zen 5 with the panels
  // (ViT-B/16 at batch 1: 1.29x on 2 threads) and on an Intel Xeon in oneDNN's layout
  // (ViT-B/16: 1.11x at batch 1, 1.06x at 4); behind at 1576 rows and more, where the
  // batch is split into lanes instead (batch 16: 0.96-0.99x).
  return simd::avx512() && M <= kPreferredRows;
}

namespace {
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

memory::desc plain_weights(int64_t K, int64_t N) {
  return memory::desc({K, N}, dt::f32, tag::ba);  // w[N,K] row-major as the [K,N] operand
}

dnnl::matmul::primitive_desc make_pd(int64_t M, int64_t K, int64_t N, const memory::desc& wei, bool bias,
                                     bool gelu = false) {
  return matmul_pd({{M, K}, dt::f32, tag::ab}, wei, {{M, N}, dt::f32, tag::ab}, bias, gelu);
}

// oneDNN's blocked layout for w (chosen by the primitive for 256 rows; every row count then
// uses it), or an empty desc where it does not fit in w's own memory, oneDNN has no blocked
// layout, or VIT_PACK=panels asks for the panels.
const memory::desc& dnnl_layout(int64_t K, int64_t N) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, int64_t>, memory::desc> cache;
  static const bool panels = [] {
    const char* env = std::getenv("VIT_PACK");
    return env && std::strcmp(env, "panels") == 0;
  }();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({K, N});
  if (it != cache.end()) return it->second;
  memory::desc d;
  if (!panels) {
    try {
      const auto pd = make_pd(256, K, N, memory::desc({K, N}, dt::f32, tag::any), true);
      const memory::desc w = pd.weights_desc();
      if (w.get_size() == size_t(K * N) * sizeof(float) && w != plain_weights(K, N)) d = w;
    } catch (const dnnl::error&) {  // no such primitive here: the panels
    }
  }
  return cache.emplace(std::make_pair(K, N), d).first->second;
}

bool in_dnnl_layout(int64_t K, int64_t N) {
  return !dnnl_layout(K, N).is_zero();
}

// One matmul primitive per (M, K, N, bias, gelu) on the blocked layout wei, made on first use.
dnnl::matmul& dnnl_matmul(int64_t M, int64_t K, int64_t N, const memory::desc& wei, bool bias, bool gelu) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, dnnl::matmul> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(M, K, N, bias, gelu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, dnnl::matmul(make_pd(M, K, N, wei, bias, gelu))).first;
  return it->second;
}

// w's memory reordered between the plain [N,K] rows and oneDNN's layout (to_blocked) through
// a temporary copy: pure data movement, so the two directions are exact inverses.
void reorder_inplace(float* w, int64_t K, int64_t N, bool to_blocked) {
  std::vector<float> tmp(size_t(K * N));
  const memory::desc plain = plain_weights(K, N), &blocked = dnnl_layout(K, N);
  memory from(to_blocked ? plain : blocked, dnnl_engine(), w),
      to(to_blocked ? blocked : plain, dnnl_engine(), tmp.data());
  dnnl::stream s(dnnl_engine());
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
  std::copy(tmp.begin(), tmp.end(), w);
}

// Each 16-row block of w[N,K] transposed to [K, width] (to_panels) or back, in place.
void transpose_panels(float* w, int64_t N, int64_t K, bool to_panels) {
  std::vector<float> tmp(size_t(kPanel * K));
  for (int64_t n0 = 0; n0 < N; n0 += kPanel) {
    const int64_t pw = panel_width(N, n0);
    float* blk = w + n0 * K;
    if (to_panels)
      transpose(tmp.data(), pw, blk, K, pw, K);  // [pw, K] -> [K, pw]
    else
      transpose(tmp.data(), K, blk, pw, K, pw);  // [K, pw] -> [pw, K]
    std::copy(tmp.begin(), tmp.begin() + pw * K, blk);
  }
}
}  // namespace

bool packed_in_dnnl_layout(int64_t N, int64_t K) {
  return in_dnnl_layout(K, N);
}

void pack_linear_weights(float* w, int64_t N, int64_t K) {
  if (in_dnnl_layout(K, N)) return reorder_inplace(w, K, N, true);
  transpose_panels(w, N, K, true);
}

void unpack_linear_weights(float* w, int64_t N, int64_t K) {
  if (in_dnnl_layout(K, N)) return reorder_inplace(w, K, N, false);
  transpose_panels(w, N, K, false);
}

void linear_forward_packed(float* y, const float* x, const float* wp, const float* b, int64_t M, int64_t K,
                           int64_t N, bool gelu) {
  if (M == 0 || N == 0) return;
  if (const memory::desc& wei = dnnl_layout(K, N); !wei.is_zero()) {
    dnnl::matmul& mm = dnnl_matmul(M, K, N, wei, b != nullptr, gelu);
    const memory::desc src({M, K}, dt::f32, tag::ab), dst({M, N}, dt::f32, tag::ab);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(src, dnnl_engine(), const_cast<float*>(x))},
        {DNNL_ARG_WEIGHTS, memory(wei, dnnl_engine(), const_cast<float*>(wp))},
        {DNNL_ARG_DST, memory(dst, dnnl_engine(), y)}};
    if (b)
      args.emplace(DNNL_ARG_BIAS, memory({{1, N}, dt::f32, tag::ab}, dnnl_engine(), const_cast<float*>(b)));
    dnnl::stream s(dnnl_engine());
    mm.execute(s, args);
    s.wait();
    return;
  }
  if (simd::avx512())
    forward_avx512(y, x, wp, b, M, K, N);
  else
    forward_plain(y, x, wp, b, M, K, N);
  if (gelu) gelu_forward(y, y, M * N);
}

}  // namespace vit::cpu
