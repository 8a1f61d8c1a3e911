// Locates tests/data (CTest sets TEMPER_TEST_DATA; running a test binary by hand falls back to the
// source tree path compiled in).
#pragma once

#include <cstdlib>
#include <string>

namespace temper::test {

inline std::string test_data(const std::string& rel) {
  const char* e = std::getenv("TEMPER_TEST_DATA");
  return std::string(e ? e : TEMPER_TEST_DATA_DIR) + "/" + rel;
}

}  // namespace temper::test
