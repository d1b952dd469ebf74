// The MPI Comm behind world(): comm_mpi.cpp when CMake found MPI, comm_no_mpi.cpp otherwise
// (CMakeLists.txt compiles exactly one of them).
#pragma once
#include <memory>

#include "train/comm.h"

namespace vit::detail {

bool mpi_available();
// Initializes MPI (threads: funneled, only the main thread calls MPI) and returns its
// world; the Comm's destructor finalizes MPI.
std::unique_ptr<Comm> make_mpi_comm();

}  // namespace vit::detail
