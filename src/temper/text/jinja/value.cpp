// Value conversions and comparisons with Python's rules (see value.h).
#include "temper/text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "temper/text/utf8.h"

namespace temper::text::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items) {
    if (equal(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value v) {
  for (auto& [k, old] : items) {
    if (equal(k, key)) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::get(size_t pos, std::string_view name) const {  // NOLINT
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return pos < args.size() ? &args[pos] : nullptr;
}

Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v(Kind::kCallable);
  v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

namespace {

// A namespace is the one mutable value; held inside another value it could form cycles or chains
// whose depth no constructor sees, so it may only be a variable (no chat template does more).
void check_item(const Value& v) {
  if (v.is_namespace()) throw EvalError("a namespace() can only be a variable, not held in a list, dict or namespace");
}

uint16_t nesting_of(const Dict& d) {
  int n = 0;
  for (const auto& [k, v] : d.items) {
    check_item(v);
    n = std::max(n, v.nesting());
  }
  if (n >= Value::kMaxNesting) throw EvalError("values nested deeper than " + std::to_string(Value::kMaxNesting));
  return static_cast<uint16_t>(n + 1);
}

}  // namespace

Value::Value(List l) : kind_(Kind::kList), list_(std::make_shared<List>(std::move(l))) {
  int n = 0;
  for (const Value& v : *list_) {
    check_item(v);
    n = std::max(n, v.nesting());
  }
  if (n >= kMaxNesting) throw EvalError("values nested deeper than " + std::to_string(kMaxNesting));
  nesting_ = static_cast<uint16_t>(n + 1);
}

Value::Value(Dict d) : kind_(Kind::kDict), dict_(std::make_shared<Dict>(std::move(d))) {
  nesting_ = nesting_of(*dict_);
}

Value Value::make_namespace(Dict d) {
  Value v(Kind::kNamespace);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  v.nesting_ = nesting_of(*v.dict_);
  return v;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return v.is_markup() ? "Markup" : "str";
    case Value::Kind::kList:
      return v.is_generator() ? "generator" : v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kCallable:
      return "function";
    case Value::Kind::kNamespace:
      return "Namespace";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return v.is_generator() || !v.as_list().empty();
    case Value::Kind::kDict:
      return !v.as_dict().items.empty();
    default:
      return true;
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind() || a.is_generator() != b.is_generator()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List &x = a.as_list(), &y = b.as_list();
      if (a.is_generator()) return &x == &y;
      if (a.is_tuple() != b.is_tuple() || x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.as_dict() == &b.as_dict();
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 bytes order = code points
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() && !b.is_generator()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw EvalError("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: exponent form when the decimal point falls
  // before the 4th leading zero or past the 16th digit.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp10 = std::stoi(s.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  const int decpt = exp10 + 1;  // digits d1d2... times 10^(decpt - ndigits)
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out = "0." + std::string(-decpt, '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out = digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return neg ? "-" + out : out;
}

namespace {

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char q = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_next(s, i);
    i += c.len;
    char esc[12];
    if (c.cp == '\\' || c.cp == static_cast<char32_t>(q)) {
      out += '\\';
      out += static_cast<char>(c.cp);
    } else if (c.cp == '\n') {
      out += "\\n";
    } else if (c.cp == '\r') {
      out += "\\r";
    } else if (c.cp == '\t') {
      out += "\\t";
    } else if (c.cp < 0x20 || (c.cp >= 0x7f && c.cp < 0xa0)) {
      std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned>(c.cp));
      out += esc;
    } else if (c.cp == 0x2028 || c.cp == 0x2029) {
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c.cp));
      out += esc;
    } else {
      utf8_append(out, c.cp);
    }
  }
  return out + q;
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return string_repr(v.as_string());
    case Value::Kind::kUndefined:
      return "Undefined";
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return float_repr(v.as_double());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kList: {
      if (v.is_generator()) throw EvalError("a generator has no text (Python prints its address): add | list");
      const List& l = v.as_list();
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + repr(l[i]);
      if (v.is_tuple() && l.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict().items) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(x);
        first = false;
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    case Value::Kind::kCallable:
      return "<function " + v.as_callable().name + ">";
  }
  return "";
}

}  // namespace temper::text::jinja
