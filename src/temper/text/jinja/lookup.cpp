// Attribute, item and slice lookup, the str/dict methods templates call, iteration, len, `in`, and
// the global functions (see builtins.h). Python's str.format handles {} {0} {name} without format
// specs.
#include <algorithm>
#include <cmath>

#include "temper/text/jinja/builtins.h"
#include "temper/text/jinja/call_args.h"
#include "temper/text/jinja/py_str.h"

namespace temper::text::jinja {

namespace {

[[noreturn]] void undefined_error(const Value& u) {
  throw EvalError(u.as_string().empty() ? "a value is undefined" : u.as_string());
}

Value string_list(const std::vector<std::string>& v) {
  List l;
  l.reserve(v.size());
  for (const auto& s : v) l.emplace_back(s);
  return Value(std::move(l));
}

bool affix_match(const std::string& s, const Value& x, bool prefix, const std::string& fn) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) throw EvalError(fn + "() argument must be str or a tuple of str, not " + type_name(p));
    const std::string& a = p.as_string();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (x.is_list()) {
    for (const Value& p : x.as_list()) {
      if (one(p)) return true;
    }
    return false;
  }
  return one(x);
}

std::string str_format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') throw EvalError("format(): single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) throw EvalError("format(): single '{' encountered in format string");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw EvalError("format(): field '{" + field + "}' uses a spec or conversion, which is not supported");
    }
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < a.args.size() ? &a.args[auto_index++] : nullptr;
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      const size_t k = std::stoul(field);
      v = k < a.args.size() ? &a.args[k] : nullptr;
    } else {
      for (const auto& [k, x] : a.kwargs) {
        if (k == field) v = &x;
      }
    }
    if (!v) throw EvalError("format(): no argument for field '{" + field + "}'");
    out += to_str(*v);
    i = close;
  }
  return out;
}

Value str_method(const std::string& s, const std::string& m, CallArgs& a) {
  const ArgReader r(a, "str." + m);
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    return py_strip(s, r.str(0, "chars"), m != "rstrip", m != "lstrip");
  }
  if ((m == "split" || m == "rsplit") && r.str(0, "sep") && r.str(0, "sep")->empty()) {
    throw EvalError("str." + m + "(): empty separator");
  }
  if (m == "split") return string_list(py_split(s, r.str(0, "sep"), r.integer(1, "maxsplit", -1)));
  if (m == "rsplit") return string_list(py_rsplit(s, r.str(0, "sep"), r.integer(1, "maxsplit", -1)));
  if (m == "splitlines") return string_list(py_splitlines(s));
  if (m == "startswith" || m == "endswith") {
    const Value* x = r.get(0, "prefix");
    if (!x) throw EvalError("str." + m + "() takes at least 1 argument (0 given)");
    return affix_match(s, *x, m == "startswith", "str." + m);
  }
  if (m == "upper") return py_upper(s);
  if (m == "lower") return py_lower(s);
  if (m == "title") return py_title(s);
  if (m == "capitalize") return py_capitalize(s);
  if (m == "replace")
    return checked_replace(s, r.required_str(0, "old"), r.required_str(1, "new"), r.integer(2, "count", -1));
  if (m == "find" || m == "rfind") return py_find(s, r.required_str(0, "sub"), m == "rfind");
  if (m == "index" || m == "rindex") {
    const int64_t at = py_find(s, r.required_str(0, "sub"), m == "rindex");
    if (at < 0) throw EvalError("substring not found");
    return at;
  }
  if (m == "count") return py_count(s, r.required_str(0, "sub"));
  if (m == "format") return str_format(s, a);
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string x = r.required_str(0, "affix");
    if (m == "removeprefix") return s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s;
    return x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 ? s.substr(0, s.size() - x.size())
                                                                                    : s;
  }
  if (m == "join") {
    const Value* it = r.get(0, "iterable");
    if (!it) throw EvalError("str.join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(*it)) {
      if (!x.is_string()) throw EvalError("sequence item: expected str instance, " + type_name(x) + " found");
      out += (first ? "" : s) + x.as_string();
      first = false;
    }
    return out;
  }
  auto all = [&](auto pred) {
    const std::u32string u = py_decode(s);
    if (u.empty()) return false;
    for (char32_t c : u) {
      if (!pred(c)) return false;
    }
    return true;
  };
  if (m == "isdigit") return all([](char32_t c) { return c >= '0' && c <= '9'; });
  if (m == "isspace") return all(py_isspace);
  if (m == "isalpha") return all([](char32_t c) { return c < 0x80 ? std::isalpha(static_cast<int>(c)) != 0 : true; });
  if (m == "isalnum") return all([](char32_t c) { return c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : true; });
  if (m == "isupper") return py_upper(s) == s && py_lower(s) != s;
  if (m == "islower") return py_lower(s) == s && py_upper(s) != s;
  throw EvalError("str has no method '" + m + "' in this interpreter");
}

Value dict_method(const Value& d, const std::string& m, CallArgs& a) {
  const ArgReader r(a, "dict." + m);
  List out;
  if (m == "items") {
    for (const auto& [k, v] : d.as_dict().items) out.push_back(Value::tuple({k, v}));
    return Value(std::move(out));
  }
  if (m == "keys" || m == "values") {
    for (const auto& [k, v] : d.as_dict().items) out.push_back(m == "keys" ? k : v);
    return Value(std::move(out));
  }
  if (m == "get") {
    const Value* key = r.get(0, "key");
    if (!key) throw EvalError("dict.get() takes at least 1 argument (0 given)");
    const Value* v = d.as_dict().find(*key);
    return v ? *v : r.value(1, "default", Value::none());
  }
  throw EvalError("dict." + m + "() is not allowed: transformers renders chat templates in an immutable sandbox");
}

bool is_str_method(const std::string& n) {
  static const char* kNames[] = {"strip",      "lstrip",       "rstrip",       "split",  "rsplit",  "splitlines",
                                 "startswith", "endswith",     "upper",        "lower",  "title",   "capitalize",
                                 "replace",    "find",         "rfind",        "index",  "rindex",  "count",
                                 "format",     "removeprefix", "removesuffix", "join",   "isdigit", "isspace",
                                 "isalpha",    "isalnum",      "isupper",      "islower"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

bool is_dict_method(const std::string& n) {
  static const char* kNames[] = {"items", "keys",    "values",     "get",   "update",
                                 "pop",   "popitem", "setdefault", "clear", "copy"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

bool is_list_mutator(const std::string& n) {
  static const char* kNames[] = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

}  // namespace

std::string checked_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  int64_t n = py_count(s, old);
  if (count >= 0) n = std::min(n, count);
  if (n > 0 && static_cast<int64_t>(with.size()) > ((16 << 20) - static_cast<int64_t>(s.size())) / n) {
    throw EvalError("replace(): the result would exceed 16 MiB");
  }
  return py_replace(s, old, with, count);
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_namespace()) {
    const Value* v = obj.as_dict().find(name);
    return v ? *v : Value::undefined("'Namespace' has no attribute '" + name + "'");
  }
  if (obj.is_string() && is_str_method(name)) {
    return Value::callable("str." + name, [s = obj.as_string(), name](CallArgs& a) { return str_method(s, name, a); });
  }
  if (obj.is_dict()) {
    if (is_dict_method(name)) {
      return Value::callable("dict." + name, [obj, name](CallArgs& a) { return dict_method(obj, name, a); });
    }
    const Value* v = obj.as_dict().find(name);
    return v ? *v : Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  if (obj.is_list() && !obj.is_generator() && (name == "count" || name == "index")) {
    return Value::callable("list." + name, [obj, name](CallArgs& a) -> Value {
      if (a.args.size() != 1) throw EvalError("list." + name + "() takes exactly one argument");
      const List& l = obj.as_list();
      int64_t n = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        if (!equal(l[i], a.args[0])) continue;
        if (name == "index") return static_cast<int64_t>(i);
        ++n;
      }
      if (name == "index") throw EvalError(repr(a.args[0]) + " is not in list");
      return n;
    });
  }
  if (obj.is_list() && is_list_mutator(name)) {
    return Value::callable("list." + name, [name](CallArgs&) -> Value {
      throw EvalError("list." + name +
                      "() is not allowed: transformers renders chat templates in an immutable sandbox");
    });
  }
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_generator()) return Value::undefined("'generator' object is not subscriptable");
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      auto c = py_index(obj.as_string(), i);
      return c ? Value(*c) : Value::undefined("string index out of range");
    }
    const auto n = static_cast<int64_t>(obj.as_list().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("list object has no element " + std::to_string(key.as_int()));
    return obj.as_list()[i];
  }
  if (obj.is_dict() || obj.is_namespace()) {
    const Value* v = obj.as_dict().find(key);
    if (v) return *v;
    if (obj.is_dict() && key.is_string() && is_dict_method(key.as_string())) return get_attr(obj, key.as_string());
    return Value::undefined("'dict object' has no attribute " + repr(key));
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined("'" + type_name(obj) + " object' has no item " + repr(key));
}

Value get_slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step) {
  if (obj.is_undefined()) undefined_error(obj);
  if (step && *step == 0) throw EvalError("slice step cannot be zero");
  if (obj.is_generator()) return Value::undefined("'generator' object is not subscriptable");
  if (obj.is_string()) {
    const std::u32string u = py_decode(obj.as_string());
    std::u32string out;
    for (int64_t i : py_slice_indices(static_cast<int64_t>(u.size()), start, stop, step)) out += u[i];
    return py_encode(out);
  }
  if (obj.is_list()) {
    List out;
    for (int64_t i : py_slice_indices(static_cast<int64_t>(obj.as_list().size()), start, stop, step)) {
      out.push_back(obj.as_list()[i]);
    }
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
  }
  return Value::undefined("'" + type_name(obj) + "' object is not subscriptable");
}

List iterate(const Value& v) {
  if (v.is_generator() && !v.as_string().empty()) throw EvalError(v.as_string());
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      List out;
      for (const auto& [k, x] : v.as_dict().items) out.emplace_back(k);
      return out;
    }
    case Value::Kind::kString: {
      List out;
      const std::u32string u = py_decode(v.as_string());
      for (char32_t c : u) out.emplace_back(py_encode(std::u32string(1, c)));
      return out;
    }
    default:
      throw EvalError("'" + type_name(v) + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return py_len(v.as_string());
    case Value::Kind::kList:
      if (v.is_generator()) throw EvalError("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().items.size());
    default:
      throw EvalError("object of type '" + type_name(v) + "' has no len()");
  }
}

bool contains(const Value& c, const Value& item) {
  if (c.is_string()) {
    if (!item.is_string()) throw EvalError("'in <string>' requires string as left operand, not " + type_name(item));
    return c.as_string().find(item.as_string()) != std::string::npos;
  }
  if (c.is_dict() || c.is_namespace()) {
    if ((item.is_list() && !item.is_tuple() && !item.is_generator()) || item.is_dict() || item.is_namespace())
      throw EvalError("unhashable type: '" + type_name(item) + "'");
    return c.as_dict().find(item) != nullptr;
  }
  for (const Value& x : iterate(c)) {
    if (equal(x, item)) return true;
  }
  return false;
}

namespace {

Value range_fn(CallArgs& a) {
  if (!a.kwargs.empty() || a.args.empty() || a.args.size() > 3) throw EvalError("range() takes 1 to 3 integers");
  for (const Value& v : a.args) {
    if (!v.is_int() && !v.is_bool()) throw EvalError("range(): '" + type_name(v) + "' is not an integer");
  }
  const int64_t start = a.args.size() > 1 ? a.args[0].as_int() : 0;
  const int64_t stop = a.args.size() > 1 ? a.args[1].as_int() : a.args[0].as_int();
  const int64_t step = a.args.size() > 2 ? a.args[2].as_int() : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  const int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (n > 100000) throw EvalError("range too big (" + std::to_string(n) + " items; the sandbox allows 100000)");
  List out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
  return Value(std::move(out));
}

Dict kwargs_dict(CallArgs& a, const char* fn) {
  Dict d;
  for (const Value& v : a.args) {
    if (!v.is_dict()) throw EvalError(std::string(fn) + "() positional arguments must be dicts");
    for (const auto& [k, x] : v.as_dict().items) d.set(k, x);
  }
  for (auto& [k, v] : a.kwargs) d.set(k, v);
  return d;
}

}  // namespace

Dict builtin_globals() {
  Dict g;
  g.set("range", Value::callable("range", range_fn));
  g.set("namespace",
        Value::callable("namespace", [](CallArgs& a) { return Value::make_namespace(kwargs_dict(a, "namespace")); }));
  g.set("dict", Value::callable("dict", [](CallArgs& a) { return Value(kwargs_dict(a, "dict")); }));
  g.set("raise_exception", Value::callable("raise_exception", [](CallArgs& a) -> Value {
          throw EvalError(a.args.empty() ? std::string() : to_str(a.args[0]), /*raised=*/true);
        }));
  return g;
}

}  // namespace temper::text::jinja
