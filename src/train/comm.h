// Communication between the processes of a data-parallel run. The training loop sees
// only this interface; one implementation is a single process (every collective is the
// identity), the other MPI's world (src/train/comm_mpi.cpp, built when CMake finds MPI).
//
// Every MPI collective is non-blocking and waited for with a deadline (set_timeout):
// a rank that hangs or dies makes the others stop with a message instead of waiting
// forever. Failures a rank can report (an exception: unreadable data, a loss that is not
// finite, a full disk) travel in a status exchange (exchange_status) so that every rank
// stops at the same point and rank 0 prints which rank failed and why.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"

namespace vit {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this host (they share its cores).
  virtual int local_size() const = 0;
  // Sums x[0..n) over ranks in place; every rank receives the same bits.
  virtual void sum(float* x, int64_t n) = 0;
  virtual void sum(double* x, int64_t n) = 0;
  // Every rank's string, in rank order.
  virtual std::vector<std::string> gather(const std::string& s) = 0;
  // Ends every process of the job (after a failure the other ranks cannot know of).
  [[noreturn]] virtual void abort(int code) = 0;
  // Seconds a rank waits in one collective before it gives up on the others.
  virtual void set_timeout(double seconds) = 0;
  // "MPI (OpenMPI 4.1.4)" or "single process": for logs.
  virtual std::string describe() const = 0;
  bool root() const { return rank() == 0; }
};

// The processes this program runs as: MPI's world when built with MPI and started by
// mpirun (MPI is initialized on the first call), else one process. Started by mpirun
// with several processes in a build without MPI is an error (each would train alone).
Comm& world();
// world() if it has been called, else null (nothing initialized).
Comm* world_if_started();
// Finalizes MPI if world() initialized it; call once before main returns.
void finalize_world();
// Whether this build can run over MPI.
bool have_mpi();

// Thrown on every rank when some rank failed at a status exchange: all ranks know, so
// no one needs to abort the job. Its message names the failed ranks and their errors.
class RankFailure : public Error {
 public:
  explicit RankFailure(const std::string& what) : Error(what) {}
};

// One status exchange. `error` is this rank's failure ("" = none); stats[0..n) are summed
// over ranks in the same collective. Throws RankFailure on every rank if any failed.
void exchange_status(Comm& comm, const std::string& error, double* stats = nullptr, int64_t n = 0);
// Runs fn on every rank, then exchanges its status (and sums stats[0..n) in the same
// collective): an exception on one rank becomes a RankFailure on all. `what` names the
// phase in the message ("loading the data"). A single process just runs fn: its
// exceptions pass unchanged.
void run_agreed(Comm& comm, const std::string& what, const std::function<void()>& fn, double* stats = nullptr,
                int64_t n = 0);
// Checks that every rank has the same `value` for each named field (build id, config
// hash, dataset size, ...); on a mismatch throws RankFailure listing the differences.
void check_agreement(Comm& comm, const std::vector<std::pair<std::string, std::string>>& fields);

// This executable's GNU build id (hex), or "unknown": equal ids mean the same build.
std::string build_id();

}  // namespace vit
