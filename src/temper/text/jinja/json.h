// JSON in and out of template values: conversations and kwargs arrive as nlohmann::ordered_json
// (key order kept, as Python dicts keep it); the tojson filter writes Python's json.dumps as
// transformers configures it (ensure_ascii=False unless asked, indent, separators, sort_keys).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "temper/text/jinja/value.h"

namespace temper::text::jinja {

Value from_json(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;             // per level; nullopt: one line
  std::optional<std::string> item_sep, key_sep;  // defaults ", "/": " (one line) or ","/": " (indented)
  bool sort_keys = false;
};

// json.dumps(v, ...); undefined, callables and namespaces are an EvalError (not JSON serializable).
std::string json_dumps(const Value& v, const JsonDumpOptions& o);

}  // namespace temper::text::jinja
