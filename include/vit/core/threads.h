// Thread count for every parallel loop and for the GEMM library (both use OpenMP).
#pragma once
#include <cstdint>
#include <functional>

namespace vit {

void set_num_threads(int n);  // n <= 0: leave the OpenMP default
int num_threads();

// Threads worth starting for a loop of `work` units (about one multiply-add each): one
// per kWorkPerThread units, at most num_threads(). Small ops then run on the calling
// thread and skip the fork/join, which costs microseconds on a quiet machine and far more
// when another process holds the second core.
inline constexpr int64_t kWorkPerThread = int64_t(1) << 16;
int threads_for(int64_t work);

// Runs f(0) .. f(n-1), each on its own thread of one parallel region (fewer threads take
// several in order), with every parallel loop inside f on the calling thread alone. An
// exception thrown by any f is rethrown here, the one of the lowest index first, after all
// have finished.
void run_on_threads(int n, const std::function<void(int)>& f);
// Whether the caller runs inside a parallel region (where loops run on one thread).
bool in_parallel();

}  // namespace vit
