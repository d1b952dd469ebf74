#include "vit/core/threads.h"

#include <omp.h>

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

}  // namespace vit
