#include "temper/core/memory_info.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "temper/core/log.h"

namespace temper {

namespace {
// A byte count from a cgroup file; -1 when absent or unlimited ("max", or v1's huge sentinel).
int64_t cgroup_limit(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return -1;
  try {
    const long long v = std::stoll(s);
    return v > 0 && v < (int64_t{1} << 60) ? static_cast<int64_t>(v) : -1;
  } catch (...) {
    return -1;
  }
}
}  // namespace

int64_t usable_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : -1;
  for (const char* p : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"})
    if (int64_t lim = cgroup_limit(p); lim > 0) bytes = bytes > 0 ? std::min(bytes, lim) : lim;
  return bytes > 0 ? bytes : int64_t{8} << 30;
}

double resident_mib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  if (!(f >> pages >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double peak_resident_mib() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

PageSpan whole_pages_in(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (b >= e) return {};
  return {reinterpret_cast<char*>(b), reinterpret_cast<char*>(e)};
}

bool drop_pages(PageSpan s) {
  return s.begin == s.end || ::madvise(s.begin, static_cast<size_t>(s.end - s.begin), MADV_DONTNEED) == 0;
}

void zero_and_release(void* p, size_t n) {
  char* b = static_cast<char*>(p);
  const PageSpan pages = whole_pages_in(b, n);
  if (pages.begin == pages.end) {
    std::memset(b, 0, n);
    return;
  }
  std::memset(b, 0, static_cast<size_t>(pages.begin - b));
  std::memset(pages.end, 0, static_cast<size_t>(b + n - pages.end));
  if (drop_pages(pages)) return;
  const int err = errno;
  std::memset(pages.begin, 0, static_cast<size_t>(pages.end - pages.begin));
  static std::atomic<bool> said{false};  // once a process: the memory plan counted these pages as given back
  if (!said.exchange(true)) {
    TEMPER_LOG(warn) << "madvise(MADV_DONTNEED) refused (" << std::strerror(err)
                     << "): released gradient or weight pages stay resident, above the memory plan";
  }
}

bool advise_huge_pages(void* p, size_t n) {
  const PageSpan pages = whole_pages_in(p, n);
  return pages.begin != pages.end &&
         ::madvise(pages.begin, static_cast<size_t>(pages.end - pages.begin), MADV_HUGEPAGE) == 0;
}

}  // namespace temper
