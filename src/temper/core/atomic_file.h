// Writing a file so that a crash or a concurrent reader never sees it half-written: write to a temporary name
// beside the target, fsync it, rename it over the target, fsync the directory. The one copy, at the lowest layer:
// io (io/atomic_file.h, which adds whole directories; gguf_writer, which streams tensors into the temporary) and flow
// (its feature cache) all use it.
#pragma once

#include <functional>
#include <string>

namespace temper {

// Calls write(tmp_path) to produce the file, fsyncs it and renames it to `path`. On any error the temporary is
// removed and the previous `path` (if any) is untouched. The temporary's name is unique to the process and the call,
// so threads writing the same path at once never share one.
void write_file_atomic(const std::string& path, const std::function<void(const std::string& tmp_path)>& write);
void write_text_atomic(const std::string& path, const std::string& text);
void fsync_path(const std::string& path);  // a file or directory

}  // namespace temper
