// What the backend's oneDNN matmuls (the bf16 inference and mixed-precision training products)
// share: one CPU engine per process, made on first use, and their primitive descriptors.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "core/activation.h"

namespace vit::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// dst[M,N] = src[M,K] wei[K,N] (+ an fp32 bias [1,N]) under attr (post-ops, scratchpad mode).
inline dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& src, const dnnl::memory::desc& wei,
                                              const dnnl::memory::desc& dst, bool bias,
                                              const dnnl::primitive_attr& attr) {
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

}  // namespace vit::cpu
