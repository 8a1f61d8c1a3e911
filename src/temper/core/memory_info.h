// How much memory this process may use: the machine's physical memory, or the container's limit
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) when that is lower. For defaults that scale with
// the machine (rl.reuse_activations_mb = 0).
#pragma once

#include <cstdint>

namespace temper {

int64_t usable_memory_bytes();  // 8 GiB when nothing can be read

// This process's resident memory now (/proc/self/statm) and at its peak (getrusage's ru_maxrss), in MiB; 0 when
// it cannot be read.
double resident_mib();
double peak_resident_mib();

}  // namespace temper
