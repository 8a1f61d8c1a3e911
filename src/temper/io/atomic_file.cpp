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
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/" -> "out"
  TEMPER_CHECK(!target.empty() && target.filename() != "." && target.filename() != "..")
      << dir << ": not a directory name to write";
  fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string base = target.filename().string(), pid = std::to_string(::getpid());
  const fs::path tmp = parent / (base + ".tmp." + pid), old = parent / (base + ".old." + pid);
  std::error_code ec;
  TEMPER_CHECK(!fs::exists(target, ec) || fs::is_directory(target, ec))
      << target.string() << ": exists and is not a directory";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  TEMPER_CHECK(!ec) << tmp.string() << ": cannot create (" << ec.message() << ")";
  bool moved_old = false;
  try {
    fill(tmp.string());
    for (auto& e : fs::directory_iterator(tmp))
      if (e.is_regular_file()) fsync_path(e.path().string());
    fsync_path(tmp.string());
    if (fs::exists(target)) {
      fs::rename(target, old, ec);
      TEMPER_CHECK(!ec) << target.string() << ": cannot move the old directory aside (" << ec.message() << ")";
      moved_old = true;
    }
    fs::rename(tmp, target, ec);
    TEMPER_CHECK(!ec) << target.string() << ": cannot move the new directory into place (" << ec.message() << ")";
    if (moved_old) fs::remove_all(old, ec);
    fsync_path(parent.string());
  } catch (...) {
    std::error_code ignore;
    if (moved_old && !fs::exists(target, ignore)) fs::rename(old, target, ignore);  // put the old one back
    fs::remove_all(tmp, ignore);
    throw;
  }
}

}  // namespace temper::io
