// What the backend's oneDNN matmuls (the bf16 inference and mixed-precision training products)
// share: one CPU engine per process, made on first use, and their primitive descriptors.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

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

// The same, then GELU (erf) as a post-op when gelu: fc1 and its activation in one pass.
inline dnnl::matmul::primitive_desc matmul_pd(const dnnl::memory::desc& src, const dnnl::memory::desc& wei,
                                              const dnnl::memory::desc& dst, bool bias, bool gelu) {
  dnnl::primitive_attr attr;
  if (gelu) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  return matmul_pd(src, wei, dst, bias, attr);
}

}  // namespace vit::cpu
