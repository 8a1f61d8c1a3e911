#include "temper/core/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace temper {
namespace {

LogLevel level_from_env() {
  const char* e = std::getenv("TEMPER_LOG");
  if (!e) return LogLevel::info;
  if (!std::strcmp(e, "debug")) return LogLevel::debug;
  if (!std::strcmp(e, "warn")) return LogLevel::warn;
  if (!std::strcmp(e, "error")) return LogLevel::error;
  return LogLevel::info;
}

struct LogState {
  std::mutex mu;
  LogSink sink;
  LogLevel level = level_from_env();
};

LogState& state() {
  static LogState s;
  return s;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "?";
}

}  // namespace

void log_set_sink(LogSink sink) {
  std::lock_guard<std::mutex> g(state().mu);
  state().sink = std::move(sink);
}

void log_set_level(LogLevel level) { state().level = level; }
LogLevel log_level() { return state().level; }

void log_write(LogLevel level, std::string_view msg) {
  auto& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.sink) {
    s.sink(level, msg);
    return;
  }
  std::fprintf(stderr, "[temper %s] %.*s\n", level_name(level), static_cast<int>(msg.size()), msg.data());
}

}  // namespace temper
