// Detects the CPU's instruction sets once and picks the path every dispatcher follows
// (isa.h); VIT_ISA forces one, for A/B timing in one build and for testing every path a CPU
// can run (scripts/test.sh).
#include "backends/cpu/isa.h"

#include <cstdlib>
#include <string>

#include "core/settings.h"
#include "vit/core/error.h"

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

}  // namespace vit::cpu
