// What the backend's oneDNN matmuls (the bf16 and AMX int8 inference products and the
// mixed-precision training products) share: one CPU engine per process, made on first use,
// their primitive descriptors, the scratchpad each execution brings, and weights packed once
// with their primitives per shape. Their primitives run in user scratchpad mode: the
// library-managed scratchpad belongs to the thread that made the primitive, so a primitive
// run by another thread at the same time (shards, model replicas, a caller's threads) would
// share it (oneDNN's dnnl_scratchpad_mode_t; tests/api/test_classifier.cpp showed wrong bf16
// logits from replicas).
#pragma once
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cpu/cpu.h"
#include "core/activation.h"
#include "core/threads.h"

namespace vit::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// dst[M,N] = src[M,K] wei[K,N] (+ an fp32 bias [1,N]) under attr (post-ops), in user
// scratchpad mode.
inline dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& src, const dnnl::memory::desc& wei,
                                              const dnnl::memory::desc& dst, bool bias,
                                              dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (!bias) return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, dnnl_engine());
  const dnnl::memory::desc b({1, dst.dims()[1]}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, b, dst), attr, dnnl_engine());
}

// The same, then the MLP's activation as a post-op when act is given: fc1 and its activation
// in one pass (GELU's erf or tanh form, or QuickGELU as swish with alpha 1.702).
inline dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& src, const dnnl::memory::desc& wei,
                                              const dnnl::memory::desc& dst, bool bias,
                                              std::optional<Activation> act) {
  dnnl::primitive_attr attr;
  if (act) {
    dnnl::post_ops po;
    if (*act == Activation::quick_gelu)
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.702f, 0.f);
    else
      po.append_eltwise(1.f,
                        *act == Activation::gelu_tanh ? dnnl::algorithm::eltwise_gelu_tanh
                                                      : dnnl::algorithm::eltwise_gelu_erf,
                        0.f, 0.f);
    attr.set_post_ops(po);
  }
  return matmul_pd(src, wei, dst, bias, attr);
}

// The scratchpad of an execution of pd's primitive on this thread: a per-thread buffer,
// grown once, then reused.
inline dnnl::memory thread_scratchpad(const dnnl::matmul::primitive_desc& pd) {
  thread_local Scratch<uint8_t> pad;
  const dnnl::memory::desc d = pd.scratchpad_desc();
  return dnnl::memory(d, dnnl_engine(), grown(pad, int64_t(d.get_size()) + 1));
}

// One execution of a matmul on this thread: dst = src wei (+ bias), the arrays as its
// descriptors say, the scratchpad this thread's.
inline void run_matmul(const dnnl::matmul::primitive_desc& pd, const dnnl::matmul& mm,
                       const dnnl::memory& wei, const void* src, void* dst, const float* bias) {
  auto& e = dnnl_engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), e, const_cast<void*>(src))},
      {DNNL_ARG_WEIGHTS, wei},
      {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), e, dst)},
      {DNNL_ARG_SCRATCHPAD, thread_scratchpad(pd)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), e, const_cast<float*>(bias)));
  dnnl::stream s(e);
  mm.execute(s, args);
  s.wait();
}

// Inference weights reordered once into the blocked layout their matmuls prefer, and those
// matmuls, made on first use per Key (the row count, and what else varies). A primitive that
// asks for another layout gets its own copy in it, made once and kept: oneDNN's int8 matmul
// on AMX takes its weights plain, but for a single row it runs AVX512-VNNI kernels that want
// them with their column sums appended. Calls may come at once, from shards and replicas.
template <typename Key>
class PackedMatmul {
 public:
  struct Prim {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul matmul;
    dnnl::memory weights;  // in pd's layout
  };

  // The weights as given (user) in the layout pd prefers.
  void pack(const dnnl::memory& user, const dnnl::matmul::primitive_desc& pd) {
    std::lock_guard<ForkSafeMutex> lock(mu_);
    layouts_ = {reordered(user, pd.weights_desc())};
    by_key_.clear();
  }

  // The primitive for key (make(key) gives its descriptor the first time), as copies of
  // oneDNN's handles.
  template <typename Make>
  Prim prim(const Key& key, Make make) {
    std::lock_guard<ForkSafeMutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it != by_key_.end()) return it->second;
    const dnnl::matmul::primitive_desc pd = make(key);
    return by_key_.emplace(key, Prim{pd, dnnl::matmul(pd), in_layout(pd.weights_desc())}).first->second;
  }

  // dst = src w (+ bias) through key's primitive.
  template <typename Make>
  void run(const Key& key, Make make, const void* src, void* dst, const float* bias) {
    const Prim p = prim(key, make);
    run_matmul(p.pd, p.matmul, p.weights, src, dst, bias);
  }

 private:
  // The weights in layout: a copy made before, or a new one from the first.
  dnnl::memory in_layout(const dnnl::memory::desc& layout) {
    for (const dnnl::memory& m : layouts_)
      if (m.get_desc() == layout) return m;
    return layouts_.emplace_back(reordered(layouts_.front(), layout));
  }

  // from in layout; through the plain row-major layout where oneDNN has no direct reorder
  // (between its blocked int8 layouts).
  static dnnl::memory reordered(const dnnl::memory& from, const dnnl::memory::desc& layout) {
    dnnl::memory to(layout, dnnl_engine());
    dnnl::stream s(dnnl_engine());
    auto& src = const_cast<dnnl::memory&>(from);
    try {
      dnnl::reorder(src, to).execute(s, src, to);
    } catch (const dnnl::error&) {
      const dnnl::memory::desc d = from.get_desc();
      dnnl::memory plain({d.dims(), d.data_type(), dnnl::memory::format_tag::ab}, dnnl_engine());
      dnnl::reorder(src, plain).execute(s, src, plain);
      dnnl::reorder(plain, to).execute(s, plain, to);
    }
    s.wait();
    return to;
  }

  std::vector<dnnl::memory> layouts_;  // [0]: as packed; then those later primitives asked for
  std::map<Key, Prim> by_key_;
  ForkSafeMutex mu_;  // a child forked while another thread held it finds it free (core/threads.h)
};

}  // namespace vit::cpu
