// Writing files and directories so that a crash never leaves a half-written result: write to a
// temporary name beside the target, fsync the data (and the directory), then rename over it.
#pragma once

#include <functional>
#include <string>

namespace temper::io {

// Calls write(tmp_path) to produce the file, fsyncs it and renames it to `path`. On any error the
// temporary is removed and the previous `path` (if any) is untouched.
void write_file_atomic(const std::string& path, const std::function<void(const std::string& tmp_path)>& write);
void write_text_atomic(const std::string& path, const std::string& text);
void fsync_path(const std::string& path);  // a file or directory
// Builds a directory with fill(tmp_dir) and renames it to `dir`; an existing `dir` is replaced only
// after the new one is complete (old moved aside, then removed).
void write_dir_atomic(const std::string& dir, const std::function<void(const std::string& tmp_dir)>& fill);

}  // namespace temper::io
