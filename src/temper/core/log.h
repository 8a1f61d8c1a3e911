// One logging sink with levels. TEMPER_LOG(info) << "..." writes a line through the sink if the level
// is enabled (TEMPER_LOG env: debug|info|warn|error; default info). Metrics do not go through here.
// Never log at info inside per-token loops.
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <string_view>

namespace temper {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

using LogSink = std::function<void(LogLevel, std::string_view)>;

void log_set_sink(LogSink sink);  // nullptr restores the default (stderr)
void log_set_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, std::string_view msg);

namespace detail {
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine() { log_write(level_, ss_.str()); }
  template <class T>
  LogLine& operator<<(const T& v) {
    ss_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream ss_;
};
}  // namespace detail
}  // namespace temper

#define TEMPER_LOG(lvl)                                                        \
  if (::temper::LogLevel::lvl < ::temper::log_level()) {                       \
  } else                                                                       \
    ::temper::detail::LogLine(::temper::LogLevel::lvl)
