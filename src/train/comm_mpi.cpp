// MPI's world as a Comm. Errors return (MPI_ERRORS_RETURN) instead of killing the process
// inside MPI, and every collective is non-blocking and polled against a deadline: MPI has
// no timeouts of its own, and a blocking call would wait forever for a rank that hangs.
// A failed or timed-out collective prints which rank gave up and why, then MPI_Abort ends
// the whole job (the others may be stuck inside the same collective).
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "core/check.h"
#include "core/settings.h"
#include "train/comm_mpi.h"

namespace vit::detail {

namespace {

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local) ==
        MPI_SUCCESS) {
      MPI_Comm_size(local, &local_size_);
      MPI_Comm_free(&local);
    }
    timeout_ = setting_seconds("VIT_COMM_TIMEOUT").value_or(timeout_);
  }
  ~MpiComm() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  void sum(float* x, int64_t n) override { sum_as(x, n, MPI_FLOAT, "summing gradients"); }
  void sum(double* x, int64_t n) override { sum_as(x, n, MPI_DOUBLE, "exchanging status"); }

  std::vector<std::string> gather(const std::string& s) override {
    int len = int(s.size());
    std::vector<int> lens(size_), offs(size_);
    MPI_Request req;
    check(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req), "gathering");
    wait(req, "gathering message lengths");
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      offs[r] = total;
      total += lens[r];
    }
    std::string all(size_t(total), '\0');
    check(MPI_Iallgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR,
                          MPI_COMM_WORLD, &req),
          "gathering");
    wait(req, "gathering messages");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(offs[r]), size_t(lens[r])));
    return out;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  void set_timeout(double seconds) override { timeout_ = seconds; }
  std::string describe() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(v, &n);
    std::string s(v, size_t(n));
    return "MPI, " + std::to_string(size_) + " processes (" + s.substr(0, s.find_first_of(",\n")) + ")";
  }

 private:
  template <typename T>
  void sum_as(T* x, int64_t n, MPI_Datatype type, const char* what) {
    // MPI counts are int: large arenas go in chunks (one chunk up to 2^31 - 1 floats).
    for (int64_t first = 0; first < n; first += INT_MAX) {
      const int count = int(std::min<int64_t>(INT_MAX, n - first));
      MPI_Request req;
      check(MPI_Iallreduce(MPI_IN_PLACE, x + first, count, type, MPI_SUM, MPI_COMM_WORLD, &req), what);
      wait(req, what);
    }
  }

  // Polls req until it completes or the deadline passes. Spins for the first milliseconds
  // (a step's collectives usually complete within them), then sleeps between polls so a
  // waiting rank leaves the cores to the ranks still computing.
  void wait(MPI_Request& req, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (timeout_ > 0 && s > timeout_) {
        print_error_line(detail::concat("vit: error: rank ", rank_, ": no answer from the other ranks for ",
                                        timeout_, " s while ", what,
                                        ": a rank died, hangs or is far slower (VIT_COMM_TIMEOUT / "
                                        "--comm-timeout set the limit); ending the job"));
        abort(2);
      }
      if (s > 0.002) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, msg, &n);
    print_error_line(detail::concat("vit: error: rank ", rank_, ": MPI failed while ", what, ": ",
                                    std::string(msg, n), " (another rank probably died); ending the job"));
    abort(2);
  }

  int rank_ = 0, size_ = 1, local_size_ = 1;
  double timeout_ = 600;
};

}  // namespace

bool mpi_available() {
  return true;
}

std::unique_ptr<Comm> make_mpi_comm() {
  return std::make_unique<MpiComm>();
}

}  // namespace vit::detail
