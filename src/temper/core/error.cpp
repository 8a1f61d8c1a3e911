#include "temper/core/error.h"

#include <cstring>

namespace temper::detail {

ErrorBuilder::ErrorBuilder(const char* file, int line, const char* cond) {
  const char* base = std::strstr(file, "src/temper/");
  where_ = std::string(base ? base : file) + ":" + std::to_string(line);
  if (cond) where_ += " (check failed: " + std::string(cond) + ")";
}

std::string ErrorBuilder::str() const {
  std::string m = msg_.str();
  return m.empty() ? where_ : m + " [" + where_ + "]";
}

void Thrower::operator&(const ErrorBuilder& b) const { throw Error(b.str()); }

}  // namespace temper::detail
