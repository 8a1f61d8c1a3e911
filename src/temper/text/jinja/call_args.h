// Reading a builtin's arguments by position or keyword, with Python defaults and type errors that
// name the function and the argument.
#pragma once

#include <optional>
#include <string>

#include "temper/text/jinja/value.h"

namespace temper::text::jinja {

class ArgReader {
 public:
  ArgReader(const CallArgs& a, std::string fn) : a_(a), fn_(std::move(fn)) {}

  const Value* get(size_t pos, std::string_view name) const {
    const Value* v = a_.get(pos, name);
    return v && !v->is_undefined() ? v : nullptr;
  }
  Value value(size_t pos, std::string_view name, Value def = Value()) const {
    const Value* v = get(pos, name);
    return v ? *v : def;
  }
  int64_t integer(size_t pos, std::string_view name, int64_t def) const {
    const Value* v = get(pos, name);
    if (!v || v->is_none()) return def;
    if (!v->is_int() && !v->is_bool()) fail(name, "an integer", *v);
    return v->as_int();
  }
  bool boolean(size_t pos, std::string_view name, bool def) const {
    const Value* v = get(pos, name);
    return v ? truthy(*v) : def;
  }
  std::optional<std::string> str(size_t pos, std::string_view name) const {
    const Value* v = get(pos, name);
    if (!v || v->is_none()) return std::nullopt;
    if (!v->is_string()) fail(name, "a string", *v);
    return v->as_string();
  }
  std::string str(size_t pos, std::string_view name, const std::string& def) const {
    return str(pos, name).value_or(def);
  }
  std::string required_str(size_t pos, std::string_view name) const {
    auto s = str(pos, name);
    if (!s) throw EvalError(fn_ + "() missing the string argument '" + std::string(name) + "'");
    return *s;
  }

  [[noreturn]] void fail(std::string_view name, const char* expected, const Value& got) const {
    throw EvalError(fn_ + "(): argument '" + std::string(name) + "' must be " + expected + ", not " + type_name(got));
  }

 private:
  const CallArgs& a_;
  std::string fn_;
};

}  // namespace temper::text::jinja
