// How much memory this process may use: the machine's physical memory, or the container's limit
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) when that is lower. For defaults that scale with
// the machine (rl.reuse_activations_mb = 0).
#pragma once

#include <cstddef>
#include <cstdint>

namespace temper {

int64_t usable_memory_bytes();  // 8 GiB when nothing can be read

// This process's resident memory now (/proc/self/statm) and at its peak (getrusage's ru_maxrss), in MiB; 0 when
// it cannot be read.
double resident_mib();
double peak_resident_mib();

// The whole pages inside [p, p + n) (rounded inward; begin == end when none), and giving them back to the system
// (madvise MADV_DONTNEED: private anonymous memory reads as zeros again, a private file mapping reads the file
// again; no memory until touched). drop_pages returns whether the system took the advice.
struct PageSpan {
  char* begin = nullptr;
  char* end = nullptr;
};
PageSpan whole_pages_in(const void* p, size_t n);
bool drop_pages(PageSpan s);
// Zeroes [p, p + n) of private anonymous memory and gives its whole pages back (drop_pages; the partial pages at
// the ends, shared with neighbours, are zeroed in place): the range reads as zeros and its whole pages cost nothing
// until written. A gradient or weight buffer's range that is no longer needed. Advice: when the system does not take
// it the range is zeroed by hand (still zeros, still resident), the first refusal is logged (warn) and the caller
// carries on.
void zero_and_release(void* p, size_t n);
// Asks for [p, p + n)'s whole pages to be backed by transparent huge pages (madvise MADV_HUGEPAGE, taken where the
// system's THP mode is `madvise` or `always`), before the range is first written. For the memory decode reads every
// token (the packed forward weights end to end, the KV pool's scattered blocks): one TLB entry per 2 MiB instead of
// per 4 KiB. Advice only: returns whether the system took it; resident memory grows by at most the partial huge pages
// at the ends of the ranges actually written.
bool advise_huge_pages(void* p, size_t n);

}  // namespace temper
