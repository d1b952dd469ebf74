// What the backend's oneDNN matmuls (the bf16 inference and mixed-precision training products)
// share: one CPU engine per process, made on first use, their primitive descriptors, and
// the scratchpad each execution brings. Their primitives run in user scratchpad mode: the
// library-managed scratchpad belongs to the thread that made the primitive, so a primitive
// run by another thread at the same time (shards, model replicas, a caller's threads) would
// share it (oneDNN's dnnl_scratchpad_mode_t; tests/api/test_classifier.cpp showed wrong bf16
// logits from replicas).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "backends/cpu/cpu.h"
#include "core/activation.h"

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

}  // namespace vit::cpu
