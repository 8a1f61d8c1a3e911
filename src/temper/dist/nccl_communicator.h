// The NCCL implementation of Communicator (TEMPER_CUDA with NCCL found; TEMPER_WITH_NCCL): the same
// interface as MPI's, so `mpirun -np N temper ...` drives N GPUs. NCCL carries the numeric
// collectives (sum/max all-reduce, broadcast of floats) on the GPU, over NVLink/InfiniBand where
// present; the control group it was bootstrapped from (MPI, or one process) carries the byte
// strings, barriers and aborts.
// Leaves out: overlapping reduction with the backward (bucketed async all-reduce).
#pragma once

#include <memory>

#include "temper/dist/communicator.h"

namespace temper::dist {

#ifdef TEMPER_WITH_NCCL
// Buffers may be device memory (reduced in place) or host memory (staged through one device buffer).
// Rank r uses device (local rank) mod (visible devices).
// Rank 0 of `control` makes the NCCL unique id and broadcasts it; every rank joins on `device`.
std::unique_ptr<Communicator> make_nccl(Communicator& control, int device);
// The process-wide GPU group over world(), on this rank's device (created on first use).
Communicator& cuda_world();
#endif

}  // namespace temper::dist
