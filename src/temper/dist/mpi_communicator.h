// The MPI implementation of Communicator (built when CMake finds MPI; TEMPER_WITH_MPI). Internal
// to dist/: the rest of temper reaches it through dist::world().
#pragma once

#include <memory>

#include "temper/dist/communicator.h"

namespace temper::dist {

#ifdef TEMPER_WITH_MPI
// MPI_Init_thread (funneled: only the main thread calls MPI) on MPI_COMM_WORLD; MPI_Finalize runs
// when the returned object is destroyed at exit.
std::unique_ptr<Communicator> make_mpi_world();
#endif

}  // namespace temper::dist
