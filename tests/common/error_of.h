// The message of the temper::Error a call throws ("(no error)" when it throws none), for tests that check
// what an error names.
#pragma once

#include <functional>
#include <string>

#include "temper/core/error.h"

namespace temper::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace temper::test
