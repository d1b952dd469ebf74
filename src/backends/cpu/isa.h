// The instruction-set layer of the CPU backend: which path of each kernel family runs.
// One detection at the first call (or VIT_ISA, read through core/env.h), then every
// dispatcher (the op files at the top of backends/cpu/) switches on isa():
//   generic  plain C++ loops, any CPU (the references the tests compare against)
//   avx2     x86-64 with AVX2 + FMA (Haswell and later, AMD Zen 1-4)          avx2/*.cpp
//   avx512   x86-64 with AVX-512 F/DQ/VL/BW (Skylake-SP and later, AMD Zen 4+)  avx512/*.cpp
//   neon     aarch64 (Advanced SIMD is part of the base ISA)                    neon/*.cpp
// A family without a kernel for the path in use takes the next one down (avx512 -> avx2 ->
// generic). Raw intrinsics live only in the folders named for their instruction set; the
// x86 folders are compiled only for x86-64 and neon/ only for aarch64 (CMakeLists.txt).
// oneDNN (matrix products, bf16) does its own detection; ONEDNN_MAX_CPU_ISA caps it.
#pragma once

namespace vit::cpu {

enum class Isa { generic, avx2, avx512, neon };

// The path in use: VIT_ISA when set (an unknown name, or one this CPU cannot run, throws
// vit::Error at the first call), else the best this CPU runs.
Isa isa();
// The best path this CPU runs, whatever VIT_ISA says.
Isa isa_detected();
bool isa_supported(Isa i);
const char* isa_name(Isa i);

// True on x86-64 builds (the avx2/ and avx512/ folders are compiled in).
#if defined(__x86_64__) || defined(_M_X64)
#define VIT_ISA_X86 1
#else
#define VIT_ISA_X86 0
#endif
#if defined(__aarch64__)
#define VIT_ISA_NEON 1
#else
#define VIT_ISA_NEON 0
#endif

}  // namespace vit::cpu
