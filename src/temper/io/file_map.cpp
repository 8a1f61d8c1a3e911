#include "temper/io/file_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/core/tensor.h"

namespace temper::io {
namespace {
LoadMode initial_mode() {
  const char* e = std::getenv("TEMPER_LOAD");
  if (!e || !std::strcmp(e, "mmap")) return LoadMode::mmap;
  if (!std::strcmp(e, "copy")) return LoadMode::copy;
  TEMPER_FAIL() << "TEMPER_LOAD='" << e << "' is not one of mmap, copy";
}
LoadMode& mode_slot() {
  static LoadMode m = initial_mode();
  return m;
}
}  // namespace

LoadMode file_load_mode() { return mode_slot(); }
void file_load_mode_set(LoadMode m) { mode_slot() = m; }
std::string_view load_mode_name(LoadMode m) { return m == LoadMode::mmap ? "mmap" : "copy"; }

FileBytes file_bytes(const std::string& path, size_t min_size, const char* what) {
  int fd = ::open(path.c_str(), O_RDONLY);
  TEMPER_CHECK(fd >= 0) << path << ": cannot open (" << std::strerror(errno) << ")";
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    TEMPER_FAIL() << path << ": cannot stat (" << std::strerror(err) << ")";
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < min_size) {
    ::close(fd);
    TEMPER_FAIL() << path << ": file is " << size << " bytes, too short for " << what;
  }
  FileBytes fb;
  fb.size = size;
  if (mode_slot() == LoadMode::mmap) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    TEMPER_CHECK(m != MAP_FAILED) << path << ": mmap failed (" << std::strerror(err) << ")";
    fb.keep = std::shared_ptr<void>(m, [size](void* p) { ::munmap(p, size); });
    fb.data = static_cast<const uint8_t*>(m);
    fb.mapped = true;
    return fb;
  }
  void* buf = nullptr;
  try {
    buf = aligned_alloc_bytes(size);
  } catch (...) {
    ::close(fd);
    throw;
  }
  fb.keep = std::shared_ptr<void>(buf, [size](void* p) { aligned_free_bytes(p, size); });
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, static_cast<char*>(buf) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      TEMPER_FAIL() << path << ": read failed after " << done << " of " << size << " bytes ("
                    << (n == 0 ? "unexpected end of file" : std::strerror(err)) << ")";
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  fb.data = static_cast<const uint8_t*>(buf);
  return fb;
}

void file_bytes_release(bool mapped, const void* p, size_t n) {
  if (!mapped || n == 0) return;
  // A private read-only file mapping never written: its pages are the file's, read again on the next access.
  drop_pages(whole_pages_in(p, n));  // advice: a failure only keeps them
}

}  // namespace temper::io
