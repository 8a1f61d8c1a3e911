#include "temper/io/atomic_file.h"

#include <unistd.h>

#include <filesystem>

#include "temper/core/error.h"

namespace temper::io {
namespace fs = std::filesystem;

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
