// A model file's bytes in memory, for the readers (safetensors, GGUF): mmapped (default: zero-copy,
// pages shared with the page cache) or copied into an owned buffer with read() (for filesystems
// where mmap is slow or unavailable). TEMPER_LOAD=mmap|copy or file_load_mode_set() chooses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace temper::io {

enum class LoadMode { mmap, copy };

LoadMode file_load_mode();
void file_load_mode_set(LoadMode m);
std::string_view load_mode_name(LoadMode m);

struct FileBytes {
  std::shared_ptr<void> keep;  // owns the mapping or the buffer
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool mapped = false;  // mmapped (else a copy in an owned buffer)
};

// Throws naming the file when it cannot be opened or is shorter than min_size (`what` names the
// format for that message, e.g. "a GGUF header (24 bytes)").
FileBytes file_bytes(const std::string& path, size_t min_size, const char* what);

// A loader done with [p, p + n) of a mapped file's bytes (a tensor copied into a model): the whole pages inside it
// leave this process's resident memory (the page cache keeps them; reading them again maps them again), so loading a
// model never holds its file whole as well. Nothing when `mapped` is false (a copy is the only one of those bytes).
void file_bytes_release(bool mapped, const void* p, size_t n);

}  // namespace temper::io
