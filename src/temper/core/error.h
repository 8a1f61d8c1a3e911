// Errors: TEMPER_CHECK(cond) << "message" throws temper::Error carrying file:line and the message.
// Library code never calls exit()/abort(); the CLI catches Error at the top and exits non-zero.
// Follows the glog CHECK idiom, but throws instead of aborting.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace temper {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

class ErrorBuilder {
 public:
  ErrorBuilder(const char* file, int line, const char* cond);
  template <class T>
  ErrorBuilder& operator<<(const T& v) {
    msg_ << v;
    return *this;
  }
  std::string str() const;

 private:
  std::ostringstream msg_;
  std::string where_;
};

struct Thrower {
  [[noreturn]] void operator&(const ErrorBuilder& b) const;
};

}  // namespace detail
}  // namespace temper

#define TEMPER_CHECK(cond) \
  if (cond) {              \
  } else                   \
    ::temper::detail::Thrower() & ::temper::detail::ErrorBuilder(__FILE__, __LINE__, #cond)

#define TEMPER_FAIL() ::temper::detail::Thrower() & ::temper::detail::ErrorBuilder(__FILE__, __LINE__, nullptr)
