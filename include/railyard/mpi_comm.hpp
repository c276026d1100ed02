#pragma once
// The MPI communicator behind a Communicator (Communicator::native()), for the few places that
// hand it to a library taking an MPI_Comm (parallel HDF5). Everything else goes through
// Communicator's collectives and never includes mpi.h.

#include <mpi.h>

namespace railyard {

struct MpiComm {
  MPI_Comm comm = MPI_COMM_NULL;
  operator MPI_Comm() const { return comm; }  // NOLINT: passed straight to MPI and HDF5 calls
};

}  // namespace railyard
