// bf16 inference linear: y = bf16(x) bf16(w)^T + b, products of bf16 values accumulated in
// fp32 (oneDNN's matmul primitive; AVX512-BF16 dot products where the CPU has them, else
// oneDNN's emulation on AVX-512). The weights are converted and packed once into the
// primitive's preferred blocked layout; each call rounds x to bf16 (nearest even) and runs
// one matmul with the bias fused. Primitives are kept per row count M.
#include <omp.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "backends/cpu/cpu.h"
#include "vit/core/error.h"
#include "vit/core/threads.h"

namespace vit::cpu {

namespace {
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
  return uint16_t(u >> 16);
}

dnnl::matmul::primitive_desc make_pd(int64_t M, int64_t K, int64_t N, bool bias) {
  const memory::desc src({M, K}, dt::bf16, tag::ab), wei({K, N}, dt::bf16, tag::any),
      dst({M, N}, dt::f32, tag::ab);
  if (bias) {
    const memory::desc b({1, N}, dt::f32, tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, b, dst), engine());
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine());
}
}  // namespace

struct PackedBf16 {
  int64_t N = 0, K = 0;
  memory weights;  // bf16 in the layout of the primitives below
  struct Prim {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul matmul;
  };
  std::map<int64_t, Prim> by_rows;  // M -> primitive
  std::mutex mu;
};

bool bf16_matmul_available() {
  static const bool ok = [] {
    try {
      (void)make_pd(16, 64, 64, true);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

std::shared_ptr<PackedBf16> pack_bf16(const float* w, int64_t N, int64_t K) {
  VIT_CHECK(bf16_matmul_available(), "bf16: oneDNN has no bf16 matmul on this CPU (needs AVX-512)");
  auto p = std::make_shared<PackedBf16>();
  p->N = N, p->K = K;
  // w is [N, K] row-major: as the [K, N] operand of x w^T that is the transposed layout `ba`.
  const auto pd = make_pd(197, K, N, true);  // any M: the layout is checked again per M
  memory user({{K, N}, dt::f32, tag::ba}, engine(), const_cast<float*>(w));
  p->weights = memory(pd.weights_desc(), engine());
  dnnl::stream s(engine());
  dnnl::reorder(user, p->weights).execute(s, user, p->weights);
  s.wait();
  return p;
}

void linear_forward_bf16(float* y, const float* x, PackedBf16& w, const float* b, int64_t M) {
  const int64_t K = w.K, N = w.N;
  std::lock_guard<std::mutex> lock(w.mu);
  auto it = w.by_rows.find(M);
  if (it == w.by_rows.end()) {
    auto pd = make_pd(M, K, N, b != nullptr);
    // The blocked weight layout does not depend on M for these shapes; repack if it does.
    if (pd.weights_desc() != w.weights.get_desc()) {
      memory repacked(pd.weights_desc(), engine());
      dnnl::stream s(engine());
      dnnl::reorder(w.weights, repacked).execute(s, w.weights, repacked);
      s.wait();
      w.weights = repacked;
      w.by_rows.clear();
    }
    it = w.by_rows.emplace(M, PackedBf16::Prim{pd, dnnl::matmul(pd)}).first;
  }
  // x rounded to bf16: one buffer per calling thread, shared by every layer (it only
  // grows, to the largest M x K seen).
  static thread_local std::vector<uint16_t> xbuf;
  if (int64_t(xbuf.size()) < M * K) xbuf.resize(size_t(M * K));
  uint16_t* xb = xbuf.data();
  const int64_t n = M * K;
#pragma omp parallel for num_threads(threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) xb[i] = to_bf16(x[i]);
  const auto& pd = it->second.pd;
  memory src(pd.src_desc(), engine(), xb), dst(pd.dst_desc(), engine(), y);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w.weights}, {DNNL_ARG_DST, dst}};
  if (b) args.emplace(DNNL_ARG_BIAS, memory(pd.bias_desc(), engine(), const_cast<float*>(b)));
  dnnl::stream s(engine());
  it->second.matmul.execute(s, args);
  s.wait();
}

}  // namespace vit::cpu
