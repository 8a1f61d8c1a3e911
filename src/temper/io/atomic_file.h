// Writing files and directories so that a crash never leaves a half-written result: write to a
// temporary name beside the target, fsync the data (and the directory), then rename over it.
// Files: core/atomic_file.h (here under io:: too); directories: here.
#pragma once

#include <functional>
#include <string>

#include "temper/core/atomic_file.h"

namespace temper::io {

using temper::fsync_path;
using temper::write_file_atomic;
using temper::write_text_atomic;
// Builds a directory with fill(tmp_dir) and renames it to `dir`; an existing `dir` is replaced only
// after the new one is complete (old moved aside, then removed).
void write_dir_atomic(const std::string& dir, const std::function<void(const std::string& tmp_dir)>& fill);

}  // namespace temper::io
