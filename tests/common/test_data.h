// Locates tests/data (CTest sets TEMPER_TEST_DATA; running a test binary by hand falls back to the
// source tree path compiled in), and the real model the bootstrap fetches (SmolLM2-135M-Instruct, Q4_1 GGUF).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace temper::test {

inline std::string test_data(const std::string& rel) {
  const char* e = std::getenv("TEMPER_TEST_DATA");
  return std::string(e ? e : TEMPER_TEST_DATA_DIR) + "/" + rel;
}

// TEMPER_SMOLLM2_GGUF, else the bootstrap's cache .cache/models.
inline std::string smollm2_path() {
  const char* e = std::getenv("TEMPER_SMOLLM2_GGUF");
  if (e) return e;
  return test_data("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

}  // namespace temper::test

// In a test body: skip, saying why, when the model is absent.
#define SKIP_WITHOUT_SMOLLM2()                                  \
  if (!std::filesystem::exists(::temper::test::smollm2_path())) \
  GTEST_SKIP() << ::temper::test::smollm2_path()                \
               << " is absent (scripts/bootstrap fetches it; or set TEMPER_SMOLLM2_GGUF)"
