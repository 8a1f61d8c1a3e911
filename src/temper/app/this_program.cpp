#include "temper/app/this_program.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "temper/core/error.h"

namespace temper::app {

std::string this_program(const std::string& who) {
  if (const char* e = std::getenv("TEMPER_SPOTLIGHT_EXE"); e && *e) return e;
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  TEMPER_CHECK(n > 0) << who << ": cannot find this program (/proc/self/exe) to start explorers";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace temper::app
