// What a switch from 256-bit AVX (upper halves left dirty) to legacy SSE instructions costs
// on this CPU: the cost that made the qemu-x86_64 runs of scripts/test_isa.sh 15x slower on
// an Intel Xeon than on an AMD Zen 5 (docs/design.md, "Testing every path").
//   cc -O2 -mavx2 -mfma bench/sse_avx_switch.c -o /tmp/sse_avx_switch && /tmp/sse_avx_switch
// Each iteration: (optionally) one vaddps on ymm8, then SSE moves and logic around one scalar
// VEX multiply-add, as a qemu float helper runs between two pieces of qemu's generated code.
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  const int n = 2000000;
  const char* names[] = {"SSE only", "after a 256-bit vaddps", "after vaddps + vzeroupper"};
  for (int mode = 0; mode < 3; ++mode) {
    const double t0 = now();
    for (int i = 0; i < n; ++i) {
      if (mode == 1) __asm__ volatile("vaddps %%ymm8, %%ymm8, %%ymm8" ::: "xmm8");
      if (mode == 2) __asm__ volatile("vaddps %%ymm8, %%ymm8, %%ymm8\n\tvzeroupper" ::: "xmm8");
      __asm__ volatile(
          "movq %%rax, %%xmm3\n\tmovapd %%xmm3, %%xmm0\n\tandpd %%xmm3, %%xmm0\n\t"
          "vfmadd213sd %%xmm2, %%xmm1, %%xmm0\n\tmovapd %%xmm0, %%xmm1" ::: "xmm0", "xmm1", "xmm3", "rax");
    }
    printf("%-28s %8.2f ns an iteration\n", names[mode], (now() - t0) / n * 1e9);
  }
  return 0;
}
