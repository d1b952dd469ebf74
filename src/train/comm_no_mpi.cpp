// Built without MPI: world() is always the single process.
#include "train/comm_mpi.h"

namespace vit::detail {

bool mpi_available() {
  return false;
}

std::unique_ptr<Comm> make_mpi_comm() {
  throw Error("this vit was built without MPI");
}

}  // namespace vit::detail
