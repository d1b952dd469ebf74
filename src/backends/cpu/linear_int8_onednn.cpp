// int8 products through oneDNN's matmul primitive: s8 activations times s8 weights into exact
// int32 sums, the weights reordered once into oneDNN's blocked layout. oneDNN runs them on
// AMX tiles where the CPU has AMX-INT8 (each tdpbssd: a 16 x 64 byte tile times a 64 x 16 one
// into 16 x 16 int32), 1.9-3.2x gemm_s8's AVX512-VNNI rate on one Xeon core, so
// int8_product() picks it there for all but narrow layers. Elsewhere oneDNN's int8 kernels are
// no faster than gemm_s8 (docs/design.md, "int8 inference"), and it is not used. Below VNNI
// (AVX2, AVX-512 without VNNI) oneDNN 2.6's s8 x s8 sums came out wrong on random operands
// (-19517 for -30283 on a 1 x 16 x 4 product; tests/ops/test_int8.cpp), so it is refused there.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>

#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/int8.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_set.h"
#include "core/check.h"

namespace vit::cpu {

namespace {
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// C[M, N] (leading dim ldc) = A[M, K] (leading dim lda) w, w [K, N] in oneDNN's own layout.
dnnl::matmul::primitive_desc make_pd(int64_t M, int64_t K, int64_t N, int64_t lda, int64_t ldc) {
  const memory::desc src({M, K}, dt::s8, memory::dims{lda, 1}), wei({K, N}, dt::s8, tag::any),
      dst({M, N}, dt::s32, memory::dims{ldc, 1});
  return matmul_pd(src, wei, dst, false, dnnl::primitive_attr());
}

// Whether oneDNN runs at least ISA i here. Its ISA values are bit sets, each holding the
// older ones' bits.
[[maybe_unused]] bool onednn_runs(dnnl::cpu_isa i) {
  const auto bits = static_cast<unsigned>(i);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bits) == bits;
}

// Whether oneDNN runs int8 matmuls on AMX here.
bool onednn_int8_on_amx() {
#if VIT_ISA_X86
  if (!onednn_runs(dnnl::cpu_isa::avx512_core_amx)) return false;
  try {
    const auto pd = make_pd(64, 256, 64, 256, 64);
    return std::string(pd.impl_info_str()).find("amx") != std::string::npos;
  } catch (const dnnl::error&) {
    return false;
  }
#else
  return false;
#endif
}
}  // namespace

bool onednn_int8_exact() {
#if VIT_ISA_X86
  return onednn_runs(dnnl::cpu_isa::avx512_core_vnni) || onednn_runs(dnnl::cpu_isa::avx2_vnni);
#else
  return true;  // its reference kernels (tests/ops/test_int8.cpp checks them under qemu)
#endif
}

struct Int8Onednn {
  int64_t N = 0, K = 0;
  // (M, lda, ldc, OpenMP threads: one inside a shard, whose threads oneDNN then does not
  // split the work for) -> primitive
  PackedMatmul<std::tuple<int64_t, int64_t, int64_t, int>> mm;
};

bool int8_on_amx() {
  static const bool yes = isa() == Isa::avx512 && onednn_int8_on_amx();
  return yes;
}

Int8Product int8_product(int64_t N, int64_t K) {
  return int8_on_amx() && N >= kAmxMinWidth && K >= kAmxMinWidth ? Int8Product::onednn : Int8Product::table;
}

const char* int8_product_name() {
  return int8_on_amx() ? "amx" : kernels().gemm_s8_name;
}

std::shared_ptr<Int8Onednn> pack_s8_onednn(const int8_t* q, int64_t N, int64_t K) {
  VIT_CHECK(onednn_int8_exact(),
            "int8: oneDNN's int8 matmul is not exact below VNNI (AVX512-VNNI or AVX-VNNI); use gemm_s8");
  auto p = std::make_shared<Int8Onednn>();
  p->N = N, p->K = K;
  // q is [N, K] row-major: as the [K, N] operand of x q^T that is the transposed layout `ba`.
  memory user({{K, N}, dt::s8, tag::ba}, dnnl_engine(), const_cast<int8_t*>(q));
  p->mm.pack(user, make_pd(197, K, N, K, N));  // any M: the layout is checked again per M
  return p;
}

void gemm_s8_onednn(int32_t* C, int64_t ldc, const int8_t* A, int64_t lda, int64_t M, Int8Onednn& w) {
  w.mm.run(
      {M, lda, ldc, omp_get_max_threads()}, [&](const auto&) { return make_pd(M, w.K, w.N, lda, ldc); }, A, C,
      nullptr);
}

}  // namespace vit::cpu
