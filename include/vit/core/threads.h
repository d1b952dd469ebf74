// Thread count for every parallel loop and for the GEMM library (both use OpenMP).
#pragma once
#include <cstdint>

namespace vit {

void set_num_threads(int n);  // n <= 0: leave the OpenMP default
int num_threads();

// Threads worth starting for a loop of `work` units (about one multiply-add each): one
// per kWorkPerThread units, at most num_threads(). Small ops then run on the calling
// thread and skip the fork/join, which costs microseconds on a quiet machine and far more
// when another process holds the second core.
inline constexpr int64_t kWorkPerThread = int64_t(1) << 16;
int threads_for(int64_t work);

}  // namespace vit
