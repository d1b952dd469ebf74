// The environment variables vitcpp reads (core/settings.h): the table and its one reader.
#include "vit/core/settings.h"

#include <cstdlib>
#include <string>

#include "vit/core/error.h"

namespace vit {

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"VIT_ISA", "generic, avx2, avx512, neon", "the best path the CPU runs",
       "the instruction-set path of the CPU kernels (vit info's isa: line); a path the CPU cannot run is an "
       "error"},
      {"VIT_PACK", "on, off",
       "on for fp32 inference up to 800 rows (4 images of 197 tokens) on AVX-512 and AVX2",
       "whether fp32 inference packs the blocks' weights in place for vitcpp's own small-batch kernel"},
      {"VIT_TILED", "on, off", "on for large products over layers up to 256 wide on AVX2",
       "whether the AVX2 path's large matrix products over narrow layers run in vitcpp's own tiled kernel "
       "instead of oneDNN's sgemm"},
      {"VIT_SHARDS", "a count; 1 turns shards off", "one shard per thread where the batch and model suit it",
       "data-parallel shards: the batch split into shards, each running the whole step on its own thread"},
      {"VIT_CLS_TAIL", "on, off", "on",
       "the class-token tail: with token pooling the last block runs on the "
       "class token's row alone after its qkv product (the same results, less work)"},
      {"VIT_MEMORY_LIMIT", "a size: 512M, 16G, ...", "MemAvailable in /proc/meminfo",
       "the memory vit train plans against: a run whose planned memory exceeds it stops before it starts "
       "(--force starts it anyway)"},
      {"VIT_COMM_TIMEOUT", "seconds", "600",
       "how long a rank of an MPI run waits for the others before it ends the job"},
      {"VIT_BIND", "auto, on, off",
       "auto: inference binds when the threads are as many as the CPUs, training does not",
       "whether vit binds each of its threads to a CPU of its own when it runs one on every CPU it may use "
       "(not with OMP_PROC_BIND or OMP_PLACES set: OpenMP binds as they say); on binds vit train's too, "
       "whose data loader's thread then shares a CPU with one of them"},
      {"OMP_NUM_THREADS", "a count", "every core", "threads (read by OpenMP)"},
      {"OMP_WAIT_POLICY", "ACTIVE, PASSIVE", "vit sets ACTIVE with GOMP_SPINCOUNT=2000",
       "how OpenMP's idle threads wait (read by OpenMP): a short spin, since passive waiting costs 65 us per "
       "parallel region"},
      {"OMP_PROC_BIND", "true, close, spread, ...", "-",
       "how OpenMP binds threads to places (read by OpenMP); when set, vit does not bind them itself"},
      {"OMP_PLACES", "threads, cores, {0},{1}, ...", "-",
       "the places OpenMP binds threads to (read by OpenMP); when set, vit does not bind them itself"},
      {"GOMP_SPINCOUNT", "a count", "2000 when vit sets OMP_WAIT_POLICY",
       "how long idle threads spin (read by "
       "libgomp)"},
      {"ONEDNN_MAX_CPU_ISA", "SSE41, AVX2, AVX512_CORE, ALL, ...", "ALL",
       "the newest instruction set oneDNN's matrix products use (read by oneDNN; scripts/test_isa.sh holds "
       "it "
       "to each path it tests)"},
      {"OMPI_COMM_WORLD_SIZE", "set by mpirun", "-",
       "a process of an MPI job (Open MPI): vit train joins it"},
      {"OMPI_COMM_WORLD_RANK", "set by mpirun", "-", "this process's rank: only rank 0 prints flag errors"},
      {"PMI_SIZE", "set by the launcher", "-", "a process of an MPI job (MPICH, Slurm with PMI)"},
      {"PMIX_SIZE", "set by the launcher", "-", "a process of an MPI job (PMIx)"},
      {"PMI_RANK", "set by the launcher", "-",
       "this process's rank (MPICH, Slurm with PMI): only rank 0 prints flag errors; with SLURM_NTASKS, a "
       "process Slurm started through PMI"},
      {"PMIX_RANK", "set by the launcher", "-",
       "a process of a PMIx job and its rank: only rank 0 prints flag errors"},
      {"SLURM_NTASKS", "set by srun", "-",
       "the size of a Slurm job (counted only with PMI_RANK or PMIX_RANK)"},
  };
  return table;
}

const char* setting(std::string_view name) {
  for (const Setting& s : settings())
    if (name == s.name) {
      const char* v = std::getenv(s.name);
      return v && *v ? v : nullptr;
    }
  throw Error(detail::concat("setting ", std::string(name), ": not in the table of core/settings.cpp"));
}

}  // namespace vit
