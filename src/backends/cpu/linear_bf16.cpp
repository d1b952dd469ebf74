// bf16 inference linear: y = bf16(x) bf16(w)^T + b, products of bf16 values accumulated in
// fp32 (oneDNN's matmul primitive; AVX512-BF16 dot products where the CPU has them, else
// oneDNN's emulation on AVX-512). The weights are converted and packed once into the
// primitive's preferred blocked layout; each call rounds x to bf16 (nearest even) and runs
// one matmul with the bias fused. Primitives are kept per row count M.
#include <omp.h>

#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "backends/cpu/cpu.h"
#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_set.h"
#include "core/check.h"
#include "core/settings.h"
#include "core/threads.h"

namespace vit::cpu {

namespace {
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
  return uint16_t(u >> 16);
}

// A matmul on bf16 x: fp32 y, or (act given) bf16 act(y) through a post-op, which is the next
// layer's input as it is: the MLP's hidden activations are never written in fp32.
dnnl::matmul::primitive_desc make_pd(int64_t M, int64_t K, int64_t N, bool bias,
                                     std::optional<Activation> act = std::nullopt) {
  const memory::desc src({M, K}, dt::bf16, tag::ab), wei({K, N}, dt::bf16, tag::any),
      dst({M, N}, act ? dt::bf16 : dt::f32, tag::ab);
  return matmul_pd(src, wei, dst, bias, act);
}

// A per-thread bf16 buffer of at least n values (grown, never shrunk); slot 0 holds a layer's
// input, slot 1 the MLP's hidden activations.
uint16_t* bf16_scratch(int slot, int64_t n) {
  static thread_local Scratch<uint16_t> buf[2];
  return grown(buf[slot], n);
}
}  // namespace

void round_to_bf16_reference(uint16_t* dst, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(x[i]);
}

void round_to_bf16(uint16_t* dst, const float* x, int64_t n) {
  const int nt = threads_for(n);
  const RoundToBf16 run = kernels().round_to_bf16;
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t lo = n * t / T / 16 * 16, hi = t + 1 == T ? n : n * (t + 1) / T / 16 * 16;
    run(dst + lo, x + lo, hi - lo);
  }
}

struct PackedBf16 {
  int64_t N = 0, K = 0;
  PackedMatmul<std::pair<int64_t, int>> mm;  // (M, activation or -1) -> primitive

  // y (fp32, or bf16 when act is given) = xb w^T + b, then act.
  void run(void* y, const uint16_t* xb, const float* b, int64_t M, std::optional<Activation> act) {
    mm.run(
        {M, act ? int(*act) : -1}, [&](const auto&) { return make_pd(M, K, N, b != nullptr, act); }, xb, y,
        b);
  }
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

std::string bf16_matmul_missing() {
  if (bf16_matmul_available()) return "";
#if VIT_ISA_X86
  // An AVX-512 CPU has one unless oneDNN is held below it (scripts/test_isa.sh does so).
  if (const char* cap = setting("ONEDNN_MAX_CPU_ISA"); cap && isa_detected() == Isa::avx512)
    return std::string("ONEDNN_MAX_CPU_ISA=") + cap +
           " holds oneDNN below the AVX-512 its bf16 matrix product needs (this CPU has AVX-512: unset it)";
  return "this CPU has no bf16 matrix product (oneDNN needs AVX-512)";
#else
  return "this CPU has no bf16 matrix product in oneDNN";
#endif
}

namespace {
// Whether oneDNN runs bf16 products in the CPU's own instructions (AVX512-BF16 or AMX).
bool bf16_matmul_native() {
#if VIT_ISA_X86
  // oneDNN's ISA values are bit sets, each holding the older ones' bits (AMX holds AVX512-BF16's).
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return bf16_matmul_available() && (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
#else
  return false;
#endif
}
}  // namespace

std::string bf16_matmul_emulated() {
  if (!bf16_matmul_available() || bf16_matmul_native()) return "";
  // Measured on an AMD Zen 4 held to AVX512_CORE: ViT-S/16 at batch 1 took 2.7x fp32's time.
  const char* cap = setting("ONEDNN_MAX_CPU_ISA");
  if (cap && std::string(cap) == "ALL") cap = nullptr;  // oneDNN's default: holds nothing back
  return std::string("no AVX512-BF16 or AMX here") +
         (cap ? std::string(" (or ONEDNN_MAX_CPU_ISA=") + cap + " holds oneDNN below them)" : "") +
         ": oneDNN emulates bf16, slower than fp32; fp32 or int8 run faster";
}

std::shared_ptr<PackedBf16> pack_bf16(const float* w, int64_t N, int64_t K) {
  VIT_CHECK(bf16_matmul_available(), "bf16: ", bf16_matmul_missing());
  auto p = std::make_shared<PackedBf16>();
  p->N = N, p->K = K;
  // w is [N, K] row-major: as the [K, N] operand of x w^T that is the transposed layout `ba`.
  memory user({{K, N}, dt::f32, tag::ba}, dnnl_engine(), const_cast<float*>(w));
  p->mm.pack(user, make_pd(197, K, N, true));  // any M: the layout is checked again per M
  return p;
}

void linear_forward_bf16(float* y, const float* x, PackedBf16& w, const float* b, int64_t M) {
  uint16_t* xb = bf16_scratch(0, M * w.K);
  round_to_bf16(xb, x, M * w.K);
  w.run(y, xb, b, M, std::nullopt);
}

void mlp_forward_bf16(float* y, const float* x, PackedBf16& fc1, const float* b1, PackedBf16& fc2,
                      const float* b2, int64_t M, Activation act) {
  uint16_t* xb = bf16_scratch(0, M * fc1.K);
  uint16_t* hb = bf16_scratch(1, M * fc1.N);
  round_to_bf16(xb, x, M * fc1.K);
  fc1.run(hb, xb, b1, M, act);  // bf16 act(x fc1^T + b1): fc2's input as it is
  fc2.run(y, hb, b2, M, std::nullopt);
}

}  // namespace vit::cpu
