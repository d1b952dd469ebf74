// The instruction-set path as a user sees it: `vit info` names it on a line starting
// `isa:` (and the matrix products' library on one starting `matrix products:`), `vit bench
// --json` records both, VIT_ISA forces any path this CPU runs, and a path it
// cannot run (or a misspelt one) is a one-line error before any work.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>
#include <string>

#include "core/settings.h"
#include "ops/ops.h"
#include "support/run_vit.h"

namespace {
using vit::test::Result;
using vit::test::run_vit;

std::string isa_line(const std::string& out) {
  const size_t at = out.find("\nisa: ");
  return at == std::string::npos ? "" : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}
}  // namespace

TEST(CliIsa, InfoAndBenchNameThePathAndVitIsaForcesIt) {
  const std::string best = vit::ops::cpu_isa_detected();
  Result r = run_vit("info --model mnist-seed", "env -u VIT_ISA");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(isa_line(r.out).rfind("isa: " + best + " (best on this CPU: " + best, 0), 0u) << r.out;
  const std::string gemm = vit::ops::cpu_gemm_library();
  EXPECT_NE(r.out.find("\nmatrix products: " + gemm + "\n"), std::string::npos) << r.out;
  for (std::string forced : {"generic", "avx2", "avx512", "neon"}) {
    const bool runs = forced == "generic" || forced == best || (forced == "avx2" && best == "avx512");
    Result f = run_vit("info --model mnist-seed", "VIT_ISA=" + forced);
    if (runs) {
      EXPECT_EQ(f.code, 0) << forced << ": " << f.out;
      EXPECT_EQ(isa_line(f.out).rfind("isa: " + forced + " ", 0), 0u) << f.out;
      Result b =
          run_vit("bench --model mnist-seed -b 2 --runs 1 --warmup 0 --min-time 0 --ceiling 100 --json",
                  "VIT_ISA=" + forced);
      ASSERT_EQ(b.code, 0) << b.out;
      const auto j = nlohmann::json::parse(b.out.substr(b.out.find('{')));
      EXPECT_EQ(j["isa"], forced) << b.out;
      EXPECT_EQ(j["gemm_library"], gemm) << b.out;
    } else {
      EXPECT_EQ(f.code, 1) << forced << ": " << f.out;
      EXPECT_EQ(
          f.out,
          "vit: error: VIT_ISA=" + forced + ": this CPU (or this build) cannot run it; it runs " + best +
              (best == "avx512" || best == "avx2" ? " (and generic, avx2 below it)\n" : " and generic\n"));
    }
  }
  Result bad = run_vit("info --model mnist-seed", "VIT_ISA=avx3");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out,
            "vit: error: VIT_ISA=avx3: unknown; one of generic, avx2, avx512, neon (did you mean avx2?)\n");
}

// What a measurement ran under: vit info's `environment:` line and vit bench's (text and
// --json "environment") name docs/environment.md's variables that are set, vit's own
// OMP_WAIT_POLICY among them, and nothing else.
TEST(CliIsa, InfoAndBenchRecordTheEnvironment) {
  std::string none = "env";  // none of the table's set (scripts/test_isa.sh sets VIT_ISA, ...)
  for (const vit::Setting& s : vit::settings()) none += std::string(" -u ") + s.name;
  const std::string env = none + " VIT_TILED=off OMP_WAIT_POLICY=PASSIVE VIT_NOT_OURS=1";
  Result info = run_vit("info --model mnist-seed", env);
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("\nenvironment: VIT_TILED=off OMP_WAIT_POLICY=PASSIVE\n"), std::string::npos)
      << info.out;
  const std::string bench = "bench --model mnist-seed -b 2 --runs 1 --warmup 0 --min-time 0 --ceiling 100";
  Result text = run_vit(bench, env);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("\n  environment: VIT_TILED=off OMP_WAIT_POLICY=PASSIVE\n"), std::string::npos)
      << text.out;
  Result json = run_vit(bench + " --json", env);
  ASSERT_EQ(json.code, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out.substr(json.out.find('{')));
  EXPECT_EQ(j["environment"], (nlohmann::json{{"VIT_TILED", "off"}, {"OMP_WAIT_POLICY", "PASSIVE"}}))
      << json.out;
  // Unset, vit sets its short spin (main.cpp), and says so.
  Result own = run_vit("info --model mnist-seed", none);
  EXPECT_NE(own.out.find("\nenvironment: OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=2000\n"), std::string::npos)
      << own.out;
}

// An int8 note on a path VIT_ISA forces names the path, not the CPU (on an AVX512-VNNI CPU
// forced to avx2 it said "no VNNI or dot product on this CPU").
TEST(CliIsa, Int8NoteOnAForcedPathNamesThePath) {
  if (vit::ops::cpu_isa_detected() != std::string("avx512")) GTEST_SKIP() << "forces avx2 on an AVX-512 CPU";
  Result r = run_vit("info", "VIT_ISA=avx2");
  ASSERT_EQ(r.code, 0) << r.out;
  if (r.out.find("\nint8 products: avx2 (") == std::string::npos) GTEST_SKIP() << "AVX-VNNI here: " << r.out;
  EXPECT_NE(
      r.out.find("(no VNNI or dot product on the avx2 path VIT_ISA forces: --dtype int8 saves 3/4 of the "
                 "weights' memory, not time)"),
      std::string::npos)
      << r.out;
}

// On a CPU with AMX-INT8 the int8 products are oneDNN's on AMX tiles, unless VIT_ISA forces
// another path or ONEDNN_MAX_CPU_ISA holds oneDNN below AMX; then the kernel table's
// AVX512-VNNI or AVX-VNNI product (this CPU has both) runs them.
TEST(CliIsa, Int8RunsOnAmxWhereTheCpuHasIt) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (flags.find(" amx_int8") == std::string::npos) GTEST_SKIP() << "no AMX-INT8 on this CPU";
  const auto product = [](const char* env) {
    Result r = run_vit("info", env);
    EXPECT_EQ(r.code, 0) << r.out;
    const size_t at = r.out.find("\nint8 products: ");
    return at == std::string::npos ? r.out : r.out.substr(at + 16, r.out.find(" (", at + 16) - at - 16);
  };
  // Each with the other variable unset: scripts/test_isa.sh runs this with both set.
  EXPECT_EQ(product("env -u VIT_ISA -u ONEDNN_MAX_CPU_ISA"), "amx");
  EXPECT_EQ(product("env -u VIT_ISA ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16"), "avx512-vnni");
  EXPECT_EQ(product("env -u ONEDNN_MAX_CPU_ISA VIT_ISA=avx2"), "avx-vnni");
}

// --dtype bf16 and --amp need oneDNN's bf16 matrix product (AVX-512). Where oneDNN is held
// below AVX-512 on a CPU that has it (ONEDNN_MAX_CPU_ISA, as scripts/test_isa.sh sets it) the
// error names the variable, not the CPU; on an x86-64 CPU without AVX-512 it names the CPU.
TEST(CliIsa, Bf16ErrorSaysWhatHoldsItBack) {
  const std::string best = vit::ops::cpu_isa_detected();
  if (best != "avx512" && best != "avx2")
    GTEST_SKIP() << "oneDNN's x86 instruction sets only (path " << best << ")";
  const std::string flags = "bench --model mnist-seed -b 2 --runs 1 --warmup 0 --min-time 0 --ceiling 100 ";
  const std::string why =
      best == "avx512" ? "ONEDNN_MAX_CPU_ISA=AVX2 holds oneDNN below the AVX-512 its bf16 matrix product "
                         "needs (this CPU has AVX-512: unset it)"
                       : "this CPU has no bf16 matrix product (oneDNN needs AVX-512)";
  Result infer = run_vit(flags + "--dtype bf16", "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(infer.code, 1) << infer.out;
  EXPECT_EQ(infer.out, "vit: error: --dtype bf16: " + why + "\n");
  Result amp = run_vit(flags + "--mode train --dtype bf16", "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(amp.code, 1) << amp.out;
  EXPECT_EQ(amp.out, "vit: error: --dtype bf16: " + why + "\n");  // it named --amp, not vit bench's flag
}

// Without AVX512-BF16 or AMX (Skylake to Ice Lake Xeons), oneDNN emulates bf16 on AVX-512:
// ViT-S/16 took 2.6x fp32's time on an AMD Zen 4 held to AVX512_CORE, and nothing said so.
// Now `vit info`, --dtype bf16 and --amp warn; held there, any AVX-512 CPU shows it.
TEST(CliIsa, EmulatedBf16SaysItIsSlowerThanFp32) {
  if (vit::ops::cpu_isa_detected() != std::string("avx512")) GTEST_SKIP() << "oneDNN's bf16 needs AVX-512";
  const std::string why =
      "no AVX512-BF16 or AMX here (or ONEDNN_MAX_CPU_ISA=AVX512_CORE holds oneDNN below them): oneDNN "
      "emulates "
      "bf16, slower than fp32; fp32 or int8 run faster";
  const std::string held = "ONEDNN_MAX_CPU_ISA=AVX512_CORE";
  Result info = run_vit("info", held);
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("\nbf16 products: oneDNN's (--dtype bf16, --amp), but " + why + "\n"),
            std::string::npos)
      << info.out;
  // PyTorch's name for it too (--dtype took bf16 alone, --amp-dtype bfloat16 alone).
  Result bench = run_vit(
      "bench --model mnist-seed -b 2 --runs 1 --warmup 0 --min-time 0 --ceiling 100 --dtype bfloat16", held);
  ASSERT_EQ(bench.code, 0) << bench.out;
  EXPECT_EQ(bench.out.rfind("vit: warning: --dtype bf16: " + why + "\n", 0), 0u) << bench.out;
  EXPECT_NE(bench.out.find(" 1 shard, bf16: "), std::string::npos) << bench.out;
  Result amp = run_vit(
      "train --model mnist-seed --synthetic 16 --epochs 1 -b 8 --amp --amp-dtype bf16 --progress none", held);
  ASSERT_EQ(amp.code, 0) << amp.out;
  EXPECT_NE(amp.out.find("\nwarning: --amp: " + why + "\n"), std::string::npos) << amp.out;
  // Unheld, the CPU decides (an AMX CPU has AVX512-BF16 too).
#if defined(__x86_64__)
  const bool native = __builtin_cpu_supports("avx512bf16");
#else
  const bool native = false;  // not reached: skipped above
#endif
  Result unheld = run_vit("info", "env -u ONEDNN_MAX_CPU_ISA");
  ASSERT_EQ(unheld.code, 0) << unheld.out;
  EXPECT_EQ(unheld.out.find("oneDNN emulates bf16") == std::string::npos, native) << unheld.out;
}
