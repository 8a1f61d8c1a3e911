// Helpers shared by the fuzz harnesses.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace temper::fuzz {

// The parsers read files (mmap), so each input is written to a per-process temp file (name ending in `suffix`).
inline std::string write_temp(const uint8_t* data, size_t size, const char* tag, const char* suffix = "") {
  std::string path = "/tmp/temper_fuzz_" + std::string(tag) + "_" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace temper::fuzz
