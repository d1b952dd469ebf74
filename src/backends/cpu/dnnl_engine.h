// The oneDNN CPU engine that every primitive of this backend (the packed fp32 and the bf16
// matmuls) runs on: one per process, made on first use.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace vit::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

}  // namespace vit::cpu
