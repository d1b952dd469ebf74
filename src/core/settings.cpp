// The environment variables vitcpp reads (core/settings.h): the table and its one reader.
#include "core/settings.h"

#include <unistd.h>  // environ

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "core/suggest.h"

namespace vit {

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"VIT_ISA", "generic, avx2, avx512, neon", "the best path the CPU runs",
       "the instruction-set path of the CPU kernels (vit info's isa: line); a path the CPU cannot run is an "
       "error",
       SettingKind::choice},
      {"VIT_PACK", "on, off",
       "on for fp32 inference up to 800 rows (4 images of 197 tokens) on AVX-512 and AVX2",
       "whether fp32 inference packs the blocks' weights in place for vitcpp's own small-batch kernel",
       SettingKind::choice},
      {"VIT_TILED", "on, off", "on for large products over layers up to 256 wide on AVX2",
       "whether the AVX2 path's large matrix products over narrow layers run in vitcpp's own tiled kernel "
       "instead of oneDNN's sgemm",
       SettingKind::choice},
      {"VIT_SHARDS", "a count; 1 turns shards off", "one shard per thread where the batch and model suit it",
       "data-parallel shards: the batch split into shards, each running the whole step on its own thread",
       SettingKind::count},
      {"VIT_CLS_TAIL", "on, off", "on",
       "the class-token tail: with token pooling the last block runs on the "
       "class token's row alone after its qkv product (the same results up to float rounding, less work; in "
       "training with --drop, other dropout masks)",
       SettingKind::choice},
      {"VIT_MEMORY_LIMIT", "a size: 512M, 16G, ...; 0 checks nothing", "MemAvailable in /proc/meminfo",
       "the memory vit train plans against: a run whose planned memory exceeds it stops before it starts "
       "(vit train --no-memory-check starts it anyway)",
       SettingKind::size},
      {"VIT_COMM_TIMEOUT", "seconds; 0 waits without end", "600",
       "how long a rank of an MPI run waits for the others before it ends the job", SettingKind::seconds},
      {"VIT_BIND", "auto, on, off",
       "auto: inference on two threads binds when they are as many as the CPUs; more threads and training do "
       "not",
       "whether vit binds each of its threads to a CPU of its own when it runs one on every CPU it may use "
       "(not with OMP_PROC_BIND or OMP_PLACES set: OpenMP binds as they say); on binds any count, and vit "
       "train's too, whose data loader's thread then shares a CPU with one of them",
       SettingKind::choice},
      {"VIT_MAX_IMAGE_PIXELS", "a count; 0 lifts the limit", "178956970 (Pillow's decompression-bomb limit)",
       "the most pixels an image file may have: larger ones are refused from their header, before they are "
       "decoded (C++: vit::set_max_image_pixels)",
       SettingKind::limit},
      {"OMP_NUM_THREADS", "a count", "every core", "threads (read by OpenMP)"},
      {"OMP_THREAD_LIMIT", "a count", "-",
       "the most threads (read by OpenMP): --threads and the default are held to it, and vit says so"},
      {"OMP_DYNAMIC", "true, false", "false",
       "read by OpenMP; vit's parallel regions run on exactly the threads they ask for whatever it says "
       "(kernels split their work by that count)"},
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
      {"LD_PRELOAD", "libraries", "-",
       "libraries loaded first (read by the dynamic loader); with valgrind's or heaptrack's, vit does not "
       "start itself again to set OMP_WAIT_POLICY (they lost the run at the restart)"},
      {"ONEDNN_MAX_CPU_ISA", "SSE41, AVX2, AVX512_CORE, ALL, ...", "ALL",
       "the newest instruction set oneDNN's matrix products use (read by oneDNN; scripts/test_isa.sh holds "
       "it to each path it tests); `AVX512_CORE_BF16` on a CPU with AMX keeps `--dtype int8` on vitcpp's own "
       "AVX512-VNNI product instead of oneDNN's AMX one (for A/B runs; bf16 then runs on AVX512-BF16)"},
      {"TERM", "a terminal type", "-",
       "dumb: progress is printed as lines (as on a pipe), not as a bar redrawn with escape codes"},
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

namespace {
const Setting& find(std::string_view name) {
  for (const Setting& s : settings())
    if (name == s.name) return s;
  throw Error(detail::concat("setting ", std::string(name), ": not in the table of core/settings.cpp"));
}

const char* value_of(const Setting& s) {
  const char* v = std::getenv(s.name);
  return v && *v ? v : nullptr;
}

const Setting& of_kind(std::string_view name, SettingKind kind) {
  const Setting& s = find(name);
  VIT_CHECK(s.kind == kind, "setting ", s.name, ": read as another kind than core/settings.cpp gives it");
  return s;
}

// The words of a choice's `values` ("auto, on, off"), as views of the table's text: reading a
// choice allocates nothing (the matrix products read VIT_TILED on every call).
template <typename F>
void for_each_word(const Setting& s, F&& f) {
  std::string_view v = s.values;
  while (!v.empty()) {
    const size_t comma = v.find(", ");
    f(v.substr(0, comma));
    v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 2);
  }
}

// A whole string as a finite number (strtod's leading part alone is not enough: "3x").
// Whether strtod would read v in hexadecimal (0x10 as 16), where the flags read decimal.
bool hexadecimal(const char* v) {
  while (std::isspace(static_cast<unsigned char>(*v))) ++v;
  if (*v == '+' || *v == '-') ++v;
  return v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
}

std::optional<double> number(const char* v) {
  if (hexadecimal(v)) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !std::isfinite(d)) return std::nullopt;
  return d;
}

[[noreturn]] void refuse(const Setting& s, const char* v, const std::string& why) {
  throw Error(detail::concat(s.name, "=", v, ": ", why));
}
}  // namespace

const char* setting(std::string_view name) {
  return value_of(find(name));
}

bool setting_present(std::string_view name) {
  return std::getenv(find(name).name) != nullptr;
}

std::string_view setting_choice(std::string_view name) {
  const Setting& s = of_kind(name, SettingKind::choice);
  const char* v = value_of(s);
  if (!v) return {};
  std::string_view match;
  for_each_word(s, [&](std::string_view w) {
    if (w == v) match = w;
  });
  if (!match.empty()) return match;
  std::vector<std::string> words;
  for_each_word(s, [&](std::string_view w) { words.emplace_back(w); });
  const std::string near = nearest_name(v, words, 2);
  refuse(s, v,
         detail::concat("unknown; one of ", s.values, near.empty() ? "" : " (did you mean " + near + "?)"));
}

namespace {
// A whole number in [lo, hi] of a variable of `kind`, or nothing when unset; `what` says the
// kind in the error.
std::optional<int64_t> whole_number(std::string_view name, SettingKind kind, double lo, double hi,
                                    const char* what) {
  const Setting& s = of_kind(name, kind);
  const char* v = value_of(s);
  if (!v) return std::nullopt;
  const std::optional<double> d = number(v);
  if (!d || *d < lo || *d != std::floor(*d) || *d > hi) refuse(s, v, what);
  return int64_t(*d);
}
}  // namespace

std::optional<int64_t> setting_count(std::string_view name) {
  return whole_number(name, SettingKind::count, 1, 1e9, "not a count (a whole number, 1 to 10^9)");
}

std::optional<int64_t> setting_limit(std::string_view name) {
  return whole_number(name, SettingKind::limit, 0, 9e15,
                      "not a limit (a whole number, 0 to 9 * 10^15; 0 lifts it)");
}

std::optional<double> setting_seconds(std::string_view name) {
  const Setting& s = of_kind(name, SettingKind::seconds);
  const char* v = value_of(s);
  if (!v) return std::nullopt;
  const std::optional<double> d = number(v);
  if (!d || *d < 0) refuse(s, v, "not a number of seconds (0 or more)");
  return d;
}

std::optional<size_t> setting_bytes(std::string_view name) {
  const Setting& s = of_kind(name, SettingKind::size);
  const char* v = value_of(s);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || !std::isfinite(d) || d < 0 || hexadecimal(v)) refuse(s, v, "not a size (e.g. 512M, 8G)");
  const std::string unit(end);
  const std::string units = "KMGT";
  const size_t at = unit.size() == 1 ? units.find(char(std::toupper(static_cast<unsigned char>(unit[0]))))
                                     : std::string::npos;
  if (!unit.empty() && at == std::string::npos)
    refuse(s, v, "unknown unit '" + unit + "' (use K, M, G or T)");
  const double bytes = unit.empty() ? d : std::ldexp(d, 10 * int(at + 1));
  if (bytes >= 0x1p63) refuse(s, v, "too large");
  // 0.5 was 0 bytes, which checks nothing: a tiny limit turned the check off.
  if (bytes > 0 && bytes < 1) refuse(s, v, "less than a byte (0 checks nothing)");
  return size_t(bytes);
}

void check_settings() {
  for (const Setting& s : settings()) switch (s.kind) {
      case SettingKind::choice: setting_choice(s.name); break;
      case SettingKind::count: setting_count(s.name); break;
      case SettingKind::limit: setting_limit(s.name); break;
      case SettingKind::seconds: setting_seconds(s.name); break;
      case SettingKind::size: setting_bytes(s.name); break;
      case SettingKind::other: break;
    }
}

std::vector<std::pair<std::string, std::string>> settings_set() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Setting& s : settings())
    if (const char* v = value_of(s)) out.emplace_back(s.name, v);
  return out;
}

std::vector<std::pair<std::string, std::string>> misspelt_settings() {
  // Names vitcpp once read, and what took their place.
  static const std::pair<const char*, const char*> retired[] = {
      {"VIT_SIMD", "VIT_ISA replaced it: VIT_ISA=generic for VIT_SIMD=off"},
  };
  std::vector<std::string> names;
  std::vector<std::pair<std::string, std::string>> out;
  for (const Setting& s : settings()) names.emplace_back(s.name);
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv = *e;
    const std::string name(kv.substr(0, kv.find('=')));
    if (name.rfind("VIT_", 0) != 0 || std::find(names.begin(), names.end(), name) != names.end()) continue;
    const auto old =
        std::find_if(std::begin(retired), std::end(retired), [&](auto& r) { return name == r.first; });
    if (old != std::end(retired))
      out.emplace_back(name, old->second);
    else if (std::string near = nearest_name(name, names, 2); !near.empty())
      out.emplace_back(name, "did you mean " + near + "?");
  }
  return out;
}

}  // namespace vit
