// Test helpers shared by the io/model tests: a per-process scratch directory per suite, and
// "this call throws temper::Error whose message names all these parts".
//
// The scratch directory is named by the process id, which the system reuses: a directory left by an
// earlier run with the same id (a crashed test, a CI machine's /tmp kept between runs) is emptied the first
// time this process asks for it, so no test ever reads another run's files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>

#include "temper/core/error.h"

namespace temper::test {

inline std::string scratch_path(const std::string& suite, const std::string& name) {
  std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("temper_test_" + suite + "_" + std::to_string(::getpid()));
  static std::mutex mu;
  static std::set<std::string> emptied;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (emptied.insert(suite).second) std::filesystem::remove_all(d);
  }
  std::filesystem::create_directories(d);
  return (d / name).string();
}

// Writes `text` to the scratch file `name` of `suite`; returns its path.
inline std::string write_scratch(const std::string& suite, const std::string& name, const std::string& text) {
  std::string p = scratch_path(suite, name);
  std::ofstream(p) << text;
  return p;
}

inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace temper::test
