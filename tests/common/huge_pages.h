// Transparent huge pages as the tests see them: the system's THP mode and the huge pages behind a buffer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace temper::test {

// The line of /sys/kernel/mm/transparent_hugepage/enabled, e.g. "always [madvise] never" (empty: no THP).
inline std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(f, mode);
  return mode;
}

// The AnonHugePages (kB) of the mapping holding `p` in /proc/self/smaps; -1 when none holds it.
inline int64_t anon_huge_kb(const void* p) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_range = false;
  int64_t kb = -1;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) in_range = lo <= at && at < hi;  // a mapping's header
    if (in_range && line.rfind("AnonHugePages:", 0) == 0) kb = std::stoll(line.substr(14));
  }
  return kb;
}

}  // namespace temper::test
