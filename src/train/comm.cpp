// The single-process Comm, world() and the status protocol shared by every Comm.
#include "train/comm.h"
#include "core/settings.h"

#include <elf.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

#include "train/comm_mpi.h"

namespace vit {

namespace {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  void sum(float*, int64_t) override {}
  void sum(double*, int64_t) override {}
  std::vector<std::string> gather(const std::string& s) override { return {s}; }
  [[noreturn]] void abort(int code) override { std::exit(code); }
  void set_timeout(double) override {}
  std::string describe() const override { return "single process"; }
};

// The number of processes the launcher started (mpirun, mpiexec, srun with PMI), or 0
// when not started by one.
int launched_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"})
    if (const char* s = setting(v)) {
      if (std::string(v) == "SLURM_NTASKS" && !setting("PMI_RANK") && !setting("PMIX_RANK")) continue;
      return std::atoi(s);
    }
  return setting("PMIX_RANK") ? 1 : 0;
}

std::unique_ptr<Comm>& world_ptr() {
  static std::unique_ptr<Comm> w;
  return w;
}

}  // namespace

bool have_mpi() {
  return detail::mpi_available();
}

Comm& world() {
  auto& w = world_ptr();
  if (w) return *w;
  const int launched = launched_size();
  if (launched > 0 && have_mpi()) {
    w = detail::make_mpi_comm();
  } else {
    VIT_CHECK(launched <= 1, "started as one of ", launched,
              " processes (mpirun), but this vit was built without MPI: each process would train alone. "
              "Install libopenmpi-dev and openmpi-bin, then reconfigure and rebuild");
    w = std::make_unique<LocalComm>();
  }
  return *w;
}

Comm* world_if_started() {
  return world_ptr().get();
}

void finalize_world() {
  world_ptr().reset();  // the MPI Comm's destructor finalizes MPI
}

void exchange_status(Comm& comm, const std::string& error, double* stats, int64_t n) {
  if (comm.size() == 1) {
    if (!error.empty()) throw RankFailure(error);
    return;
  }
  std::vector<double> buf(n + 1);
  buf[0] = error.empty() ? 0.0 : 1.0;
  for (int64_t i = 0; i < n; ++i) buf[i + 1] = stats[i];
  comm.sum(buf.data(), n + 1);
  for (int64_t i = 0; i < n; ++i) stats[i] = buf[i + 1];
  if (buf[0] == 0.0) return;
  // Somebody failed: every rank is here and alive, so gathering the messages is safe.
  const auto all = comm.gather(error);
  std::ostringstream os;
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) os << (os.tellp() > 0 ? "\n" : "") << "rank " << r << ": " << all[r];
  throw RankFailure(os.str());
}

void run_agreed(Comm& comm, const std::string& what, const std::function<void()>& fn, double* stats,
                int64_t n) {
  if (comm.size() == 1) return fn();
  std::string error;
  try {
    fn();
  } catch (const RankFailure&) {
    throw;  // already agreed by every rank (a nested exchange)
  } catch (const std::exception& e) {
    error = what.empty() ? e.what() : what + ": " + e.what();
  }
  exchange_status(comm, error, stats, n);
}

void check_agreement(Comm& comm, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (comm.size() == 1) return;
  std::string mine;
  for (auto& [k, v] : fields) mine += k + "=" + v + "\n";
  const auto all = comm.gather(mine);
  std::ostringstream os;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    // Name each field that differs from rank 0's.
    std::istringstream a(all[0]), b(all[r]);
    std::string la, lb;
    while (std::getline(a, la) && std::getline(b, lb))
      if (la != lb) os << "\n  rank " << r << " has " << lb << ", rank 0 has " << la.substr(la.find('=') + 1);
  }
  if (os.tellp() > 0)
    throw RankFailure("the ranks disagree (mixed builds, flags or data on different hosts?):" + os.str());
}

std::string build_id() {
  // The main program is the first object dl_iterate_phdr reports; its PT_NOTE segments
  // hold the linker's NT_GNU_BUILD_ID note (a hash of the linked output).
  std::string id;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) -> int {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              static const char* hex = "0123456789abcdef";
              auto* s = static_cast<std::string*>(out);
              for (unsigned k = 0; k < nh->n_descsz; ++k) {
                const auto c = static_cast<unsigned char>(desc[k]);
                *s += hex[c >> 4];
                *s += hex[c & 15];
              }
              return 1;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // only the main program
      },
      &id);
  return id.empty() ? "unknown" : id;
}

}  // namespace vit
