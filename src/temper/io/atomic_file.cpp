#include "temper/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "temper/core/error.h"

namespace temper::io {
namespace fs = std::filesystem;

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  TEMPER_CHECK(fd >= 0) << path << ": cannot open for fsync (" << std::strerror(errno) << ")";
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  TEMPER_CHECK(rc == 0) << path << ": fsync failed (" << std::strerror(err) << ")";
}

namespace {
std::string parent_of(const std::string& p) {
  fs::path parent = fs::path(p).parent_path();
  return parent.empty() ? "." : parent.string();
}
}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(const std::string&)>& write) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    write(tmp);
    fsync_path(tmp);
    fs::rename(tmp, path);
    fsync_path(parent_of(path));
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

void write_dir_atomic(const std::string& dir, const std::function<void(const std::string&)>& fill) {
  fs::path target = fs::path(dir);
  std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  try {
    fill(tmp);
    for (auto& e : fs::directory_iterator(tmp))
      if (e.is_regular_file()) fsync_path(e.path().string());
    fsync_path(tmp);
    if (fs::exists(target)) {
      std::string old = dir + ".old." + std::to_string(::getpid());
      fs::rename(target, old);
      fs::rename(tmp, target);
      fs::remove_all(old, ec);
    } else {
      fs::rename(tmp, target);
    }
    fsync_path(parent_of(dir));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace temper::io
