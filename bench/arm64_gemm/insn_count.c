/* A qemu-user TCG plugin counting the guest instructions a program executes, and among them
 * the floating-point multiply(-add)s by kind: NEON vector (fmla/fmul on v registers), SVE
 * (on z registers) and scalar (fmadd/fmul/fmla on s or d registers), and the loads and
 * stores. Prints one line to stderr at exit:
 *   insns N fp_vector N fp_sve N fp_scalar N mem N
 * Used by bench/arm64_gemm/run.sh as  qemu-aarch64 -plugin ./insn_count.so prog ...
 *
 * Debian's qemu-user (7.2) is built with plugin support but ships no qemu-plugin.h, so the
 * few entry points used are declared here from qemu's documented plugin API (version 1, as
 * in qemu 7.2; qemu's docs/devel/tcg-plugins.rst). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                           void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb*));
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void*), void* userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
char* qemu_plugin_insn_disas(const struct qemu_plugin_insn* insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op, void* ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn* insn, enum qemu_plugin_op op,
                                                void* ptr, uint64_t imm);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One vCPU: the benchmark is single-threaded, so plain counters suffice. */
static uint64_t insns, fp_vector, fp_sve, fp_scalar, mem;

static int starts_with(const char* s, const char* p) {
  return strncmp(s, p, strlen(p)) == 0;
}

/* The counter an instruction's disassembly ("fmla v0.4s, v1.4s, v2.s[0]") belongs to, or NULL. */
static uint64_t* insn_class(const char* d) {
  if (starts_with(d, "ld") || starts_with(d, "st")) return &mem;  // ldr, ldp, ld1, ldur, str, stp, st1, ...
  if (!(starts_with(d, "fmla ") || starts_with(d, "fmadd ") || starts_with(d, "fmul ") ||
        starts_with(d, "fmls ") || starts_with(d, "fmsub ")))
    return NULL;
  const char* ops = strchr(d, ' ');
  while (*ops == ' ') ++ops;
  if (ops[0] == 'z') return &fp_sve;
  if (ops[0] == 'v') return &fp_vector;
  return &fp_scalar;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  const size_t n = qemu_plugin_tb_n_insns(tb);
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
  for (size_t i = 0; i < n; ++i) {
    struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    char* d = qemu_plugin_insn_disas(insn);
    uint64_t* c = d ? insn_class(d) : NULL;
    if (c) qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, c, 1);
    free(d);
  }
}

static void at_exit_cb(qemu_plugin_id_t id, void* userdata) {
  (void)id, (void)userdata;
  fprintf(stderr, "insns %llu fp_vector %llu fp_sve %llu fp_scalar %llu mem %llu\n",
          (unsigned long long)insns, (unsigned long long)fp_vector, (unsigned long long)fp_sve,
          (unsigned long long)fp_scalar, (unsigned long long)mem);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                               int argc, char** argv) {
  (void)info, (void)argc, (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, at_exit_cb, NULL);
  return 0;
}
