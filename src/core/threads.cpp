#include "vit/core/threads.h"

#include <omp.h>

#include <exception>
#include <vector>

namespace vit {

void set_num_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}

int threads_for(int64_t work) {
  const int64_t n = work / kWorkPerThread;
  const int most = omp_get_max_threads();
  return n < 1 ? 1 : n < most ? int(n) : most;
}

void run_on_threads(int n, const std::function<void(int)>& f) {
  if (n <= 0) return;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
#pragma omp parallel num_threads(n)
  {
    omp_set_num_threads(1);  // this thread's nested loops and oneDNN calls: one thread
    const int step = omp_get_num_threads();
    for (int i = omp_get_thread_num(); i < n; i += step) {
      try {
        f(i);
      } catch (...) {
        errors[size_t(i)] = std::current_exception();
      }
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

bool in_parallel() {
  return omp_in_parallel() != 0;
}

}  // namespace vit
