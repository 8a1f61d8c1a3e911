// Jinja's builtin filters (jinja2/filters.py 3.1), tojson as transformers overrides it
// (json.dumps, ensure_ascii=False), and the builtin tests (jinja2/tests.py). Each filter takes the
// value and its arguments as Jinja's signature names them.
#include <algorithm>
#include <cmath>
#include <map>

#include "temper/text/jinja/builtins.h"
#include "temper/text/jinja/call_args.h"
#include "temper/text/jinja/json.h"
#include "temper/text/jinja/py_str.h"

namespace temper::text::jinja {

namespace {

using FilterFn = Value (*)(const Value&, const ArgReader&, CallArgs&);

std::string soft_str(const Value& v) {
  return to_str(v);
}

// int(x) of a float; Python's integers are unbounded, ours 64-bit.
int64_t to_int64(double d) {
  if (!(d > -9.2e18 && d < 9.2e18)) throw EvalError("integer overflow converting " + float_repr(d) + " to int");
  return static_cast<int64_t>(d);
}

// Widths and counts that make text: bounded before the text is built.
constexpr int64_t kMaxText = 16 << 20;

int64_t text_width(int64_t w, const char* fn) {
  if (w > kMaxText) throw EvalError(std::string(fn) + "(): width " + std::to_string(w) + " is too large");
  return w;
}

// Markup's string methods return Markup.
Value like(const Value& v, std::string s) {
  return v.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

// Jinja's attribute argument: "a.b" or an integer index path.
Value attribute_of(const Value& item, const std::string& path) {
  Value v = item;
  size_t at = 0;
  while (true) {
    const size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = numeric ? get_item(v, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

// Sort key of Jinja's sort/unique/dictsort/min/max: strings lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(py_lower(v.as_string())) : v;
}

std::vector<Value> attribute_keys(const List& items, const std::optional<std::string>& attr, bool case_sensitive) {
  std::vector<Value> keys;
  for (const Value& x : items) keys.push_back(sort_key(attr ? attribute_of(x, *attr) : x, case_sensitive));
  return keys;
}

Value f_tojson(const Value& v, const ArgReader& r, CallArgs&) {
  JsonDumpOptions o;
  o.ensure_ascii = r.boolean(0, "ensure_ascii", false);
  const Value indent = r.value(1, "indent");
  if (indent.is_int()) o.indent = std::string(text_width(std::max<int64_t>(indent.as_int(), 0), "tojson"), ' ');
  if (indent.is_string()) o.indent = indent.as_string();
  const Value seps = r.value(2, "separators");
  if (seps.is_list()) {
    if (seps.as_list().size() != 2 || !seps.as_list()[0].is_string() || !seps.as_list()[1].is_string()) {
      throw EvalError("tojson(): separators must be a pair of strings");
    }
    o.item_sep = seps.as_list()[0].as_string();
    o.key_sep = seps.as_list()[1].as_string();
  }
  o.sort_keys = r.boolean(3, "sort_keys", false);
  return json_dumps(v, o);
}

Value f_trim(const Value& v, const ArgReader& r, CallArgs&) {
  return like(v, py_strip(soft_str(v), r.str(0, "chars"), true, true));
}

Value f_length(const Value& v, const ArgReader&, CallArgs&) {
  return length(v);
}

Value f_default(const Value& v, const ArgReader& r, CallArgs& a) {
  const bool boolean = r.boolean(1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) {
    const Value* d = a.get(0, "default_value");
    return d ? *d : Value("");
  }
  return v;
}

Value f_join(const Value& v, const ArgReader& r, CallArgs&) {
  const std::string sep = r.str(0, "d", "");
  const auto attr = r.str(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    out += (first ? "" : sep) + soft_str(attr ? attribute_of(x, *attr) : x);
    first = false;
  }
  return out;
}

Value f_first(const Value& v, const ArgReader&, CallArgs&) {
  List l = iterate(v);
  return l.empty() ? Value::undefined("No first item, sequence was empty.") : l.front();
}

Value f_last(const Value& v, const ArgReader&, CallArgs&) {
  if (v.is_generator()) throw EvalError("'generator' object is not reversible");
  List l = iterate(v);
  return l.empty() ? Value::undefined("No last item, sequence was empty.") : l.back();
}

Value f_list(const Value& v, const ArgReader&, CallArgs&) {
  return Value(iterate(v));
}

Value f_items_now(const Value& v, const ArgReader&, CallArgs&) {
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) throw EvalError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::tuple({k, x}));
  return Value::generator(std::move(out));
}

Value f_dictsort(const Value& v, const ArgReader& r, CallArgs&) {
  if (!v.is_dict()) throw EvalError("dictsort(): expected a mapping, got " + type_name(v));
  const bool cs = r.boolean(0, "case_sensitive", false);
  const std::string by = r.str(1, "by", "key");
  if (by != "key" && by != "value") throw EvalError("dictsort(): 'by' must be 'key' or 'value'");
  List items;
  for (const auto& [k, x] : v.as_dict().items) items.push_back(Value::tuple({k, x}));
  const size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return less(sort_key(a.as_list()[pos], cs), sort_key(b.as_list()[pos], cs));
  });
  if (r.boolean(2, "reverse", false)) std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value f_string(const Value& v, const ArgReader&, CallArgs&) {
  return like(v, soft_str(v));
}

Value f_upper(const Value& v, const ArgReader&, CallArgs&) {
  return like(v, py_upper(soft_str(v)));
}
Value f_lower(const Value& v, const ArgReader&, CallArgs&) {
  return like(v, py_lower(soft_str(v)));
}
Value f_title(const Value& v, const ArgReader&, CallArgs&) {
  return like(v, jinja_title(soft_str(v)));
}
Value f_capitalize(const Value& v, const ArgReader&, CallArgs&) {
  return like(v, py_capitalize(soft_str(v)));
}

Value f_replace(const Value& v, const ArgReader& r, CallArgs&) {
  return like(v,
              py_replace(soft_str(v), r.required_str(0, "old"), r.required_str(1, "new"), r.integer(2, "count", -1)));
}

Value f_escape(const Value& v, const ArgReader&, CallArgs&) {
  return v.is_markup() ? v : Value::markup(html_escape(soft_str(v)));
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

Value f_int(const Value& v, const ArgReader& r, CallArgs&) {
  if (v.is_undefined()) throw EvalError(v.as_string().empty() ? "a value is undefined" : v.as_string());
  const int64_t def = r.integer(0, "default", 0);
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) return std::isfinite(v.as_double()) ? to_int64(v.as_double()) : def;
  if (!v.is_string()) return def;
  const std::string s = py_strip(v.as_string(), std::nullopt, true, true);
  try {
    size_t used = 0;
    const int64_t i = std::stoll(s, &used, static_cast<int>(r.integer(1, "base", 10)));
    if (used == s.size()) return i;
    const double d = std::stod(s, &used);
    return used == s.size() && std::isfinite(d) ? to_int64(d) : def;
  } catch (const std::exception&) {
    return def;
  }
}

Value f_float(const Value& v, const ArgReader& r, CallArgs& a) {
  const Value* def = a.get(0, "default");
  if (v.is_undefined()) throw EvalError(v.as_string().empty() ? "a value is undefined" : v.as_string());
  if (v.is_number()) return v.as_double();
  if (v.is_string()) {
    const std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    try {
      size_t used = 0;
      const double d = std::stod(s, &used);
      if (used == s.size()) return d;
    } catch (const std::exception&) {
    }
  }
  (void)r;
  return def ? *def : Value(0.0);
}

Value f_abs(const Value& v, const ArgReader&, CallArgs&) {
  if (v.is_float()) return std::fabs(v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) throw EvalError("integer overflow in abs()");
    return std::abs(v.as_int());
  }
  throw EvalError("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(const Value& v, const ArgReader& r, CallArgs&) {
  if (!v.is_number()) throw EvalError("round(): expected a number, got " + type_name(v));
  const int64_t precision = r.integer(0, "precision", 0);
  const std::string method = r.str(1, "method", "common");
  if (method == "common" && !v.is_float() && precision >= 0) return v.as_int();  // round(int, n) is the int
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double y;
  if (method == "common") {
    y = std::nearbyint(x);  // round half to even, as Python's round()
  } else if (method == "ceil") {
    y = std::ceil(x);
  } else if (method == "floor") {
    y = std::floor(x);
  } else {
    throw EvalError("round(): method must be common, ceil or floor");
  }
  return y / scale;
}

// select/reject/selectattr/rejectattr: the test and its arguments follow `skip` leading arguments.
// Jinja's generator filters fail only when iterated: an error while building one is kept in it.
template <class Body>
Value lazily(Body body) {
  try {
    return body();
  } catch (const EvalError& e) {
    if (e.raised) throw;
    return Value::failing_generator(e.what());
  }
}

Value select_impl(const Value& v, CallArgs& a, bool by_attr, bool keep) {
  std::optional<std::string> attr;
  size_t k = 0;
  if (by_attr) {
    if (a.args.empty() || !a.args[0].is_string()) throw EvalError("selectattr/rejectattr need an attribute name");
    attr = a.args[k++].as_string();
  }
  std::string test;
  if (k < a.args.size()) {
    if (!a.args[k].is_string()) throw EvalError("select/reject: the test name must be a string");
    test = a.args[k++].as_string();
  }
  CallArgs targs;
  targs.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(k), a.args.end());
  List out;
  if (!truthy(v)) return Value::generator({});  // Jinja: `if value:` before iterating
  for (const Value& x : iterate(v)) {
    const Value subject = attr ? attribute_of(x, *attr) : x;
    const bool pass = test.empty() ? truthy(subject) : apply_test(test, subject, targs);
    if (pass == keep) out.push_back(x);
  }
  return Value::generator(std::move(out));
}

Value f_select_now(const Value& v, const ArgReader&, CallArgs& a) {
  return select_impl(v, a, false, true);
}
Value f_reject_now(const Value& v, const ArgReader&, CallArgs& a) {
  return select_impl(v, a, false, false);
}
Value f_selectattr_now(const Value& v, const ArgReader&, CallArgs& a) {
  return select_impl(v, a, true, true);
}
Value f_rejectattr_now(const Value& v, const ArgReader&, CallArgs& a) {
  return select_impl(v, a, true, false);
}

Value f_map_now(const Value& v, const ArgReader& r, CallArgs& a) {
  List out;
  if (!truthy(v)) return Value::generator({});  // Jinja: `if value:` before iterating
  const auto attr = r.str(99, "attribute");
  if (attr) {
    const Value def = r.value(99, "default");
    for (const Value& x : iterate(v)) {
      Value y = attribute_of(x, *attr);
      out.push_back(y.is_undefined() && !def.is_undefined() ? def : y);
    }
    return Value::generator(std::move(out));
  }
  if (a.args.empty() || !a.args[0].is_string()) throw EvalError("map(): expected a filter name or attribute=");
  const std::string filter = a.args[0].as_string();
  CallArgs fargs;
  fargs.args.assign(a.args.begin() + 1, a.args.end());
  fargs.kwargs = a.kwargs;
  for (const Value& x : iterate(v)) out.push_back(apply_filter(filter, x, fargs));
  return Value::generator(std::move(out));
}

Value f_unique_now(const Value& v, const ArgReader& r, CallArgs&) {
  const bool cs = r.boolean(0, "case_sensitive", false);
  const auto attr = r.str(1, "attribute");
  List out, seen;
  for (const Value& x : iterate(v)) {
    const Value key = sort_key(attr ? attribute_of(x, *attr) : x, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return Value::generator(std::move(out));
}

Value f_reverse_now(const Value& v, const ArgReader&, CallArgs&) {
  if (v.is_string()) {
    std::u32string u = py_decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return py_encode(u);
  }
  List l = iterate(v);
  std::reverse(l.begin(), l.end());
  // reversed(list) is an iterator; a generator is listed and reversed into a list.
  return v.is_generator() ? Value(std::move(l)) : Value::generator(std::move(l));
}

Value f_sort(const Value& v, const ArgReader& r, CallArgs&) {
  List items = iterate(v);
  const std::vector<Value> keys = attribute_keys(items, r.str(2, "attribute"), r.boolean(1, "case_sensitive", false));
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const bool rev = r.boolean(0, "reverse", false);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rev ? less(keys[b], keys[a]) : less(keys[a], keys[b]); });
  List out;
  for (size_t i : order) out.push_back(items[i]);
  return Value(std::move(out));
}

Value min_max(const Value& v, const ArgReader& r, bool max) {
  List items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  const std::vector<Value> keys = attribute_keys(items, r.str(1, "attribute"), r.boolean(0, "case_sensitive", false));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    if (max ? less(keys[best], keys[i]) : less(keys[i], keys[best])) best = i;
  }
  return items[best];
}

Value f_min(const Value& v, const ArgReader& r, CallArgs&) {
  return min_max(v, r, false);
}
Value f_max(const Value& v, const ArgReader& r, CallArgs&) {
  return min_max(v, r, true);
}

Value f_sum(const Value& v, const ArgReader& r, CallArgs&) {
  const auto attr = r.str(0, "attribute");
  Value total = r.value(1, "start", Value(0));
  for (const Value& x : iterate(v)) {
    const Value y = attr ? attribute_of(x, *attr) : x;
    if (!y.is_number() || !total.is_number()) throw EvalError("sum(): can only add numbers, got " + type_name(y));
    if (total.is_float() || y.is_float()) {
      total = total.as_double() + y.as_double();
      continue;
    }
    int64_t sum = 0;
    if (__builtin_add_overflow(total.as_int(), y.as_int(), &sum)) throw EvalError("integer overflow in sum()");
    total = sum;
  }
  return total;
}

Value f_indent(const Value& v, const ArgReader& r, CallArgs& a) {
  if (!v.is_string()) throw EvalError("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  const Value* w = a.get(0, "width");
  const std::string ind = w && w->is_string()
                              ? w->as_string()
                              : std::string(text_width(w ? std::max<int64_t>(w->as_int(), 0) : 4, "indent"), ' ');
  const bool first = r.boolean(1, "first", false), blank = r.boolean(2, "blank", false);
  const std::vector<std::string> lines = py_splitlines(soft_str(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += ind;
    out += lines[i];
  }
  return first ? ind + out : out;
}

Value f_wordcount(const Value& v, const ArgReader&, CallArgs&) {
  const std::u32string u = py_decode(soft_str(v));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : u) {
    const bool w = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : !py_isspace(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

Value f_center(const Value& v, const ArgReader& r, CallArgs&) {
  const std::string s = soft_str(v);
  const int64_t width = text_width(r.integer(0, "width", 80), "center"), len = py_len(s);
  if (width <= len) return s;
  const int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
  return std::string(left, ' ') + s + std::string(marg - left, ' ');
}

Value f_batch_now(const Value& v, const ArgReader& r, CallArgs&) {
  const int64_t n = r.integer(0, "linecount", 1);
  if (n <= 0) throw EvalError("batch(): linecount must be positive");
  const Value fill = r.value(1, "fill_with");
  List out, cur;
  for (const Value& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) out.emplace_back(std::exchange(cur, {}));
  }
  if (!cur.empty()) {
    while (!fill.is_undefined() && static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
    out.emplace_back(std::move(cur));
  }
  return Value::generator(std::move(out));
}

// "%s %d" % args (Python's printf-style formatting, the conversions templates use).
Value f_format(const Value& v, const ArgReader&, CallArgs& a) {
  const std::string f = soft_str(v);
  std::string out;
  size_t k = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) throw EvalError("format(): incomplete format");
    const char c = f[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (k >= a.args.size()) throw EvalError("format(): not enough arguments for format string");
    const Value& x = a.args[k++];
    if (c == 's') {
      out += to_str(x);
    } else if (c == 'r') {
      out += repr(x);
    } else if (c == 'd' || c == 'i') {
      if (!x.is_number()) throw EvalError("format(): %d format: a real number is required, not " + type_name(x));
      out += std::to_string(x.is_float() ? to_int64(x.as_double()) : x.as_int());
    } else {
      throw EvalError(std::string("format(): unsupported format character '") + c + "'");
    }
  }
  if (k < a.args.size()) throw EvalError("not all arguments converted during string formatting");
  return out;
}

Value f_safe(const Value& v, const ArgReader&, CallArgs&) {
  return Value::markup(soft_str(v));
}

Value f_items(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_items_now(v, r, a); });
}

Value f_select(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_select_now(v, r, a); });
}

Value f_reject(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_reject_now(v, r, a); });
}

Value f_selectattr(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_selectattr_now(v, r, a); });
}

Value f_rejectattr(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_rejectattr_now(v, r, a); });
}

Value f_map(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_map_now(v, r, a); });
}

Value f_unique(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_unique_now(v, r, a); });
}

Value f_reverse(const Value& v, const ArgReader& r, CallArgs& a) {
  return f_reverse_now(v, r, a);  // not a generator function: fails at once
}

Value f_batch(const Value& v, const ArgReader& r, CallArgs& a) {
  return lazily([&] { return f_batch_now(v, r, a); });
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> kFilters = {
      {"abs", f_abs},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return kFilters;
}

// ---- tests ----------------------------------------------------------------------------------

bool sameas(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kList:
      return &a.as_list() == &b.as_list();
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      return &a.as_dict() == &b.as_dict();
    default:
      return equal(a, b);
  }
}

// Python's % on numbers (the odd/even/divisibleby tests); anything else is a TypeError.
Value py_mod(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) {
    throw EvalError("unsupported operand type(s) for %: '" + type_name(a) + "' and '" + type_name(b) + "'");
  }
  if (a.is_float() || b.is_float()) {
    const double q = b.as_double();
    if (q == 0) throw EvalError("float modulo by zero");
    const double m = std::fmod(a.as_double(), q);
    return m != 0 && ((m < 0) != (q < 0)) ? m + q : m;
  }
  const int64_t y = b.as_int();
  if (y == 0) throw EvalError("integer modulo by zero");
  if (y == -1) return int64_t{0};
  const int64_t m = a.as_int() % y;
  return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
}

bool is_zero(const Value& v) {
  return v.as_double() == 0;
}

bool test_impl(const std::string& n, const Value& v, const CallArgs& a) {
  auto arg = [&]() -> const Value& {
    if (a.args.empty()) throw EvalError("test '" + n + "' needs an argument");
    return a.args[0];
  };
  auto integer = [&](const Value& x) {
    if (!x.is_int() && !x.is_bool()) throw EvalError("test '" + n + "' needs an integer, got " + type_name(x));
    return x.as_int();
  };
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.is_bool();
  if (n == "true") return v.is_bool() && v.as_bool();
  if (n == "false") return v.is_bool() && !v.as_bool();
  if (n == "integer") return v.is_int();
  if (n == "float") return v.is_float();
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_dict();
  if (n == "iterable") return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string();
  if (n == "sequence") return v.is_undefined() || (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_string();
  if (n == "callable") return v.is_callable();
  if (n == "odd") return !is_zero(py_mod(v, Value(2))) && equal(py_mod(v, Value(2)), Value(1));
  if (n == "even") return is_zero(py_mod(v, Value(2)));
  if (n == "divisibleby") return is_zero(py_mod(v, arg()));
  if (n == "eq" || n == "equalto" || n == "==") return equal(v, arg());
  if (n == "ne" || n == "!=") return !equal(v, arg());
  if (n == "lt" || n == "lessthan" || n == "<") return less(v, arg());
  if (n == "le" || n == "<=") return !less(arg(), v);
  if (n == "gt" || n == "greaterthan" || n == ">") return less(arg(), v);
  if (n == "ge" || n == ">=") return !less(v, arg());
  if (n == "in") return contains(arg(), v);
  if (n == "sameas") return sameas(v, arg());
  if (n == "lower" || n == "upper") {           // str(value).islower() / .isupper()
    if (v.is_generator()) return n == "lower";  // '<generator object ... at 0x...>'
    const std::string s = to_str(v), lo = py_lower(s), up = py_upper(s);
    return n == "lower" ? lo == s && up != s : up == s && lo != s;
  }
  if (n == "escaped") return false;
  throw EvalError("no test named '" + n + "'");
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  const auto& f = filters();
  const auto it = f.find(name);
  if (it == f.end()) throw EvalError("no filter named '" + name + "'");
  return it->second(v, ArgReader(args, name), args);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  return test_impl(name, v, args);
}

}  // namespace temper::text::jinja
