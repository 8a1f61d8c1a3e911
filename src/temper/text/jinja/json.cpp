// JSON in and out of template values (see json.h); json_dumps follows CPython's json encoder.
#include "temper/text/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "temper/text/utf8.h"

namespace temper::text::jinja {

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json(x));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json(it.value()));
      return Value(std::move(d));
    }
    default:
      throw EvalError("unsupported JSON value (binary or discarded)");
  }
}

namespace {

void dump_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_next(s, i);
    i += c.len;
    char esc[16];
    switch (c.cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c.cp < 0x20 || (ensure_ascii && c.cp >= 0x7f)) {
      if (c.cp >= 0x10000) {
        const unsigned v = c.cp - 0x10000;
        std::snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      } else {
        std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c.cp));
      }
      out += esc;
    } else {
      utf8_append(out, c.cp);
    }
  }
  out += '"';
}

// json.dumps writes non-string keys as their JSON text ({1: 2} -> {"1": 2}).
std::string key_text(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.as_string();
    case Value::Kind::kInt:
      return std::to_string(k.as_int());
    case Value::Kind::kFloat:
      return float_repr(k.as_double());
    case Value::Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Value::Kind::kNone:
      return "null";
    default:
      throw EvalError("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

struct Dumper {
  const JsonDumpOptions& o;
  std::string item_sep, key_sep;
  std::string out;
  int depth = 0;

  void newline(int level) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o.indent;
  }

  void dump(const Value& v) {
    if (++depth > 256) throw EvalError("tojson: nesting deeper than 256");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        break;
      case Value::Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        break;
      case Value::Kind::kInt:
        out += std::to_string(v.as_int());
        break;
      case Value::Kind::kFloat: {
        const double x = v.as_double();
        out += std::isnan(x) ? "NaN" : std::isinf(x) ? (x < 0 ? "-Infinity" : "Infinity") : float_repr(x);
        break;
      }
      case Value::Kind::kString:
        dump_string(v.as_string(), o.ensure_ascii, out);
        break;
      case Value::Kind::kList:
        if (v.is_generator()) throw EvalError("Object of type generator is not JSON serializable");
        dump_list(v.as_list());
        break;
      case Value::Kind::kDict:
        dump_dict(v.as_dict());
        break;
      default:
        throw EvalError("Object of type " + type_name(v) + " is not JSON serializable");
    }
    --depth;
  }

  void dump_list(const List& l) {
    if (l.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += item_sep;
      newline(depth);
      dump(l[i]);
    }
    newline(depth - 1);
    out += ']';
  }

  void dump_dict(const Dict& d) {
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& kv : d.items) items.push_back(&kv);
    if (o.sort_keys) {
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return less(a->first, b->first); });
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      newline(depth);
      dump_string(key_text(items[i]->first), o.ensure_ascii, out);
      out += key_sep;
      dump(items[i]->second);
    }
    newline(depth - 1);
    out += '}';
  }
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& o) {
  Dumper d{o, o.item_sep.value_or(o.indent ? "," : ", "), o.key_sep.value_or(": "), {}, 0};
  d.dump(v);
  return std::move(d.out);
}

}  // namespace temper::text::jinja
