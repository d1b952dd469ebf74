// Thread count for every parallel loop and for the GEMM library (both use OpenMP).
#pragma once

namespace vit {

void set_num_threads(int n);  // n <= 0: leave the OpenMP default
int num_threads();

}  // namespace vit
