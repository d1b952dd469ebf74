// Detects the CPU's instruction sets once and picks the path every dispatcher follows
// (isa.h); VIT_ISA forces one, for A/B timing in one build and for testing every path a CPU
// can run (scripts/test.sh).
#include "backends/cpu/isa.h"

#include "backends/cpu/kernel_set.h"

#include <cstdlib>
#include <string>

#include "backends/cpu/int8.h"  // gemm_s8_reference
#include "core/check.h"
#include "core/settings.h"

namespace vit::cpu {

namespace {
Isa detect() {
#if VIT_ISA_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
  return Isa::generic;
#elif VIT_ISA_NEON
  return Isa::neon;
#else
  return Isa::generic;
#endif
}

Isa chosen() {
  const std::string want(setting_choice("VIT_ISA"));  // one of the table's names, or ""
  if (want.empty()) return isa_detected();
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512, Isa::neon})
    if (want == isa_name(i)) {
      VIT_CHECK(isa_supported(i), "VIT_ISA=", want, ": this CPU (or this build) cannot run it; it runs ",
                isa_name(isa_detected()), (VIT_ISA_X86 ? " (and generic, avx2 below it)" : " and generic"));
      return i;
    }
  throw Error("VIT_ISA=" + want + ": in core/settings.cpp's table but no path of isa.cpp");
}
}  // namespace

Isa isa_detected() {
  static const Isa best = detect();
  return best;
}

bool isa_supported(Isa i) {
  const Isa best = isa_detected();
  switch (i) {
    case Isa::generic: return true;
    case Isa::avx2: return best == Isa::avx2 || best == Isa::avx512;
    case Isa::avx512: return best == Isa::avx512;
    case Isa::neon: return best == Isa::neon;
  }
  return false;
}

Isa isa() {
  static const Isa in_use = chosen();
  return in_use;
}

const char* isa_name(Isa i) {
  switch (i) {
    case Isa::generic: return "generic";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
  }
  return "?";
}

CpuKernels kernels_for(Isa i) {
  VIT_CHECK(isa_supported(i), "kernels_for(", isa_name(i), "): this CPU cannot run it");
  CpuKernels k;
  generic::fill_kernels(k);
#if VIT_ISA_X86
  if (i == Isa::avx512 || i == Isa::avx2) avx2::fill_kernels(k);
  if (i == Isa::avx512) avx512::fill_kernels(k);
#elif VIT_ISA_NEON
  if (i == Isa::neon) neon::fill_kernels(k);
#endif
  return k;
}

const CpuKernels& kernels() {
  static const CpuKernels in_use = kernels_for(isa());
  return in_use;
}

std::vector<KernelVariant<GemmS8>> gemm_s8_variants() {
  std::vector<KernelVariant<GemmS8>> v{{"generic", gemm_s8_reference}};
#if VIT_ISA_X86
  if (isa_supported(Isa::avx2)) v.push_back({"avx2", avx2::gemm_s8});
  if (isa_supported(Isa::avx2) && avx2::has_avx_vnni()) v.push_back({"avx-vnni", avx2::gemm_s8_vnni});
  if (isa_supported(Isa::avx512) && avx512::has_vnni()) v.push_back({"avx512-vnni", avx512::gemm_s8_vnni});
#elif VIT_ISA_NEON
  if (isa_supported(Isa::neon)) v.push_back({"neon", neon::gemm_s8});
  if (isa_supported(Isa::neon) && neon::has_dotprod()) v.push_back({"neon-dotprod", neon::gemm_s8_dot});
#endif
  return v;
}

std::vector<KernelVariant<QuantizeRowS8>> quantize_row_s8_variants() {
  std::vector<KernelVariant<QuantizeRowS8>> v{{"generic", quantize_row_s8_reference}};
#if VIT_ISA_X86
  if (isa_supported(Isa::avx2)) v.push_back({"avx2", avx2::quantize_row_s8});
  if (isa_supported(Isa::avx512)) v.push_back({"avx512", avx512::quantize_row_s8});
#elif VIT_ISA_NEON
  if (isa_supported(Isa::neon)) v.push_back({"neon", neon::quantize_row_s8});
#endif
  return v;
}

std::vector<KernelVariant<DequantS8>> dequant_s8_variants() {
  std::vector<KernelVariant<DequantS8>> v{{"generic", dequant_s8_reference}};
#if VIT_ISA_X86
  if (isa_supported(Isa::avx2)) v.push_back({"avx2", avx2::dequant_s8});
  if (isa_supported(Isa::avx512)) v.push_back({"avx512", avx512::dequant_s8});
#endif
  return v;
}

}  // namespace vit::cpu
