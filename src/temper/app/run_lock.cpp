#include "temper/app/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "temper/core/error.h"

namespace temper::app {

RunLock::RunLock(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TEMPER_CHECK(fd_ >= 0) << path << ": cannot open the run directory's lock: " << std::strerror(errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    TEMPER_CHECK(err != EWOULDBLOCK) << dir << ": another temper train (pid "
                                     << (n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown")
                                     << ") is using this run directory; wait for it, stop it, or choose another --out";
    TEMPER_FAIL() << path << ": cannot lock the run directory: " << std::strerror(err);
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    TEMPER_FAIL() << path << ": cannot write the holder's pid: " << std::strerror(errno);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace temper::app
