#include "temper/dist/communicator.h"

#include <cstdlib>

#include "temper/dist/mpi_communicator.h"

namespace temper::dist {

void SingleProcess::abort(int code) { std::_Exit(code); }

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

bool mpi_available() {
#ifdef TEMPER_WITH_MPI
  return true;
#else
  return false;
#endif
}

int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* e = std::getenv(v)) return std::atoi(e);
  return 0;
}

Communicator& single() {
  static SingleProcess s;
  return s;
}

Communicator& world() {
#ifdef TEMPER_WITH_MPI
  if (launched_by_mpi()) {
    static std::unique_ptr<Communicator> mpi = make_mpi_world();
    return *mpi;
  }
#endif
  return single();
}

Range shard(int64_t n, int rank, int size) {
  return {n * rank / size, n * (rank + 1) / size};
}

}  // namespace temper::dist
