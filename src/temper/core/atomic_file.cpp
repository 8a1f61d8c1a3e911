// Atomic file writes (see atomic_file.h).
#include "temper/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "temper/core/error.h"

namespace temper {
namespace fs = std::filesystem;

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  TEMPER_CHECK(fd >= 0) << path << ": cannot open for fsync (" << std::strerror(errno) << ")";
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  TEMPER_CHECK(rc == 0) << path << ": fsync failed (" << std::strerror(err) << ")";
}

void write_file_atomic(const std::string& path, const std::function<void(const std::string&)>& write) {
  static std::atomic<uint64_t> calls{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls++);
  try {
    write(tmp);
    fsync_path(tmp);
    std::error_code ec;
    fs::rename(tmp, path, ec);
    TEMPER_CHECK(!ec) << path << ": cannot rename " << tmp << " into place (" << ec.message() << ")";
    const fs::path parent = fs::path(path).parent_path();
    fsync_path(parent.empty() ? "." : parent.string());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

void write_text_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    TEMPER_CHECK(f.good()) << tmp << ": cannot create (" << std::strerror(errno) << ")";
    f << text;
    f.flush();
    TEMPER_CHECK(f.good()) << tmp << ": write failed (disk full?)";
  });
}

}  // namespace temper
