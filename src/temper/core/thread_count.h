// The thread counts temper accepts: 1 to 4 x this machine's hardware threads (1024 where that is unknown). One
// check shared by --threads, TEMPER_THREADS and run.threads, so a typo (100000, -1) is refused instead of starting
// that many threads or being ignored; past a few threads per hardware thread more only adds memory and switches.
// Header-only: core (the thread pool) and the CLI both read it.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

namespace temper {

// The largest thread count accepted.
inline int max_thread_count() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(4 * hw) : 1024;
}

// What a thread count must be, for messages: "1 to 8 (4 x this machine's 2 hardware threads)".
inline std::string thread_count_range() {
  const unsigned hw = std::thread::hardware_concurrency();
  return "1 to " + std::to_string(max_thread_count()) +
         (hw ? " (4 x this machine's " + std::to_string(hw) + " hardware threads)"
             : " (this machine's hardware threads are unknown)");
}

inline bool thread_count_valid(int64_t n) {
  return n >= 1 && n <= max_thread_count();
}

// The thread count TEXT spells (a whole decimal integer, nothing around it) if it is in range, else 0.
inline int parse_thread_count(std::string_view text) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || !thread_count_valid(n)) return 0;
  return static_cast<int>(n);
}

}  // namespace temper
