// Test helpers shared by the io/model tests: a per-process scratch directory per suite, and
// "this call throws temper::Error whose message names all these parts".
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>

#include "temper/core/error.h"

namespace temper::test {

inline std::string scratch_path(const std::string& suite, const std::string& name) {
  std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("temper_test_" + suite + "_" + std::to_string(::getpid()));
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
