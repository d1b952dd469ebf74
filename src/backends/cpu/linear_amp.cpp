// Mixed-precision training products (--amp, as torch.autocast(dtype=bfloat16) does for
// nn.Linear): operands rounded to bf16 (nearest even), products accumulated in fp32, fp32
// results. The forward y = xb wb^T + b, the backward dx = dyb wb and dw += dyb^T xb, each one
// oneDNN matmul primitive (AMX tiles where the CPU has them, AVX512-BF16 dot products
// otherwise) on the plain row-major bf16 arrays, no packing: the weights change every step.
// The bias gradient sums dy itself, in fp32 (colsum_add).
//
// Primitives are made once per shape and thread count and kept. Shards run them at the same
// time, one per thread, each execution with its own scratchpad (dnnl_matmul.h).
#include <omp.h>

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "backends/cpu/cpu.h"
#include "backends/cpu/dnnl_matmul.h"
#include "core/check.h"

namespace vit::cpu {

namespace {
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

enum class Product { Forward, Forward_bias, DataGrad, WeightGrad };

struct Prim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
};

// dst[m, n] = src[m, k] wei[k, n]; which arrays play src and wei, and in which layout, per
// product (x[M,K], w[N,K], dy[M,N], all row-major):
//   Forward:    y[M,N]  = x[M,K]    (w^T)[K,N]   w read as `ba`
//   DataGrad:   dx[M,K] = dy[M,N]   w[N,K]
//   WeightGrad: dw[N,K] += (dy^T)[N,M] x[M,K]    dy read as `ba`, dw accumulated (sum post-op)
Prim make(Product p, int64_t M, int64_t K, int64_t N) {
  dnnl::primitive_attr attr;
  memory::desc src, wei, dst;
  switch (p) {
    case Product::Forward:
    case Product::Forward_bias:
      src = memory::desc({M, K}, dt::bf16, tag::ab), wei = memory::desc({K, N}, dt::bf16, tag::ba);
      dst = memory::desc({M, N}, dt::f32, tag::ab);
      break;
    case Product::DataGrad:
      src = memory::desc({M, N}, dt::bf16, tag::ab), wei = memory::desc({N, K}, dt::bf16, tag::ab);
      dst = memory::desc({M, K}, dt::f32, tag::ab);
      break;
    case Product::WeightGrad: {
      src = memory::desc({N, M}, dt::bf16, tag::ba), wei = memory::desc({M, K}, dt::bf16, tag::ab);
      dst = memory::desc({N, K}, dt::f32, tag::ab);
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
      break;
    }
  }
  const auto pd = matmul_pd(src, wei, dst, p == Product::Forward_bias, attr);
  return {pd, dnnl::matmul(pd)};
}

// The primitive for a product at this shape on this thread's OpenMP count (one inside a shard,
// whose threads oneDNN then does not split the work for).
const Prim& prim(Product p, int64_t M, int64_t K, int64_t N) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, int>, Prim> made;
  const auto key = std::make_tuple(int(p), M, K, N, omp_get_max_threads());
  std::lock_guard<std::mutex> lock(mu);
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, make(p, M, K, N)).first;
  return it->second;
}

void run(const Prim& p, const void* src, const void* wei, float* dst, const float* bias) {
  run_matmul(p.pd, p.matmul, memory(p.pd.weights_desc(), dnnl_engine(), const_cast<void*>(wei)), src, dst,
             bias);
}

// dy rounded to bf16, per thread (shards round their own).
uint16_t* dy_scratch(int64_t n) {
  thread_local Scratch<uint16_t> buf;
  return grown(buf, n);
}
}  // namespace

void linear_forward_amp(float* y, const uint16_t* xb, const uint16_t* wb, const float* b, int64_t M,
                        int64_t K, int64_t N) {
  run(prim(b ? Product::Forward_bias : Product::Forward, M, K, N), xb, wb, y, b);
}

void linear_backward_amp(float* dx, float* dw, float* db, const float* dy, const uint16_t* xb,
                         const uint16_t* wb, int64_t M, int64_t K, int64_t N) {
  if (dx || dw) {
    uint16_t* dyb = dy_scratch(M * N);
    round_to_bf16(dyb, dy, M * N);
    if (dx) run(prim(Product::DataGrad, M, K, N), dyb, wb, dx, nullptr);
    if (dw) run(prim(Product::WeightGrad, M, K, N), dyb, xb, dw, nullptr);
  }
  if (db) colsum_add(db, dy, M, N);
}

}  // namespace vit::cpu
