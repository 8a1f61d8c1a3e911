#include "temper/app/recipe.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "temper/core/error.h"

namespace temper::app {

std::string toml_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default: o += c;
    }
  }
  return o + "\"";
}

namespace {

std::string literal_of(const toml::node& n, std::string* kind) {
  std::ostringstream os;
  if (n.is_string()) {
    *kind = "string";
    return toml_quote(n.as_string()->get());
  }
  if (n.is_integer()) *kind = "integer";
  else if (n.is_floating_point()) *kind = "float";
  else if (n.is_boolean()) *kind = "boolean";
  else if (n.is_array()) *kind = "array";
  else *kind = "other";
  if (n.is_floating_point()) return toml_float(n.as_floating_point()->get());
  n.visit([&](auto&& x) { os << x; });
  return os.str();
}

void flatten(const toml::table& t, const std::string& prefix, const std::string& source,
             std::map<std::string, std::pair<std::string, std::pair<std::string, std::string>>>& out, std::set<std::string>& sections) {
  for (auto&& [k, v] : t) {
    std::string key = prefix + std::string(k.str());
    if (v.is_table()) {
      sections.insert(key + ".");  // an empty section still says "on"
      flatten(*v.as_table(), key + ".", source, out, sections);
      continue;
    }
    if (v.is_array_of_tables()) {  // [[name]]: "name.<i>.key"
      const toml::array& a = *v.as_array();
      for (size_t i = 0; i < a.size(); ++i) {
        const std::string sub = key + "." + std::to_string(i) + ".";
        sections.insert(sub);
        flatten(*a[i].as_table(), sub, source, out, sections);
      }
      continue;
    }
    std::string kind;
    std::string lit = literal_of(v, &kind);
    std::string origin = source + ":" + std::to_string(v.source().begin.line);
    out[key] = {lit, {kind, origin}};
  }
}

std::string unquote(const std::string& lit) {
  toml::table t = toml::parse("v = " + lit);
  return std::string(t["v"].value<std::string>().value_or(""));
}

}  // namespace

Recipe Recipe::parse(const std::string& text, const std::string& source) {
  Recipe r;
  r.source_ = source;
  toml::table t;
  try {
    t = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    TEMPER_FAIL() << source << ":" << e.source().begin.line << ":" << e.source().begin.column
                  << ": not valid TOML: " << e.description();
  }
  std::map<std::string, std::pair<std::string, std::pair<std::string, std::string>>> flat;
  flatten(t, "", source, flat, r.sections_);
  for (auto& [k, v] : flat) r.values_[k] = Value{v.first, v.second.first, v.second.second, ""};
  return r;
}

Recipe Recipe::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TEMPER_CHECK(in.good()) << path << ": cannot open the recipe";
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

void Recipe::set(const std::string& a) {
  size_t eq = a.find('=');
  TEMPER_CHECK(eq != std::string::npos && eq > 0) << "--set '" << a << "': expected key=value";
  std::string key = a.substr(0, eq), val = a.substr(eq + 1);
  while (!key.empty() && key.back() == ' ') key.pop_back();
  while (!val.empty() && val.front() == ' ') val.erase(0, 1);
  Value v;
  v.origin = "--set " + key;
  try {
    toml::table t = toml::parse("v = " + val);
    v.text = literal_of(*t.get("v"), &v.kind);
  } catch (const toml::parse_error&) {
    v.kind = "string";
    v.text = toml_quote(val);
  }
  values_[key] = v;
}

bool Recipe::has_prefix(const std::string& prefix) const {
  auto it = values_.lower_bound(prefix);
  if (it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0) return true;
  auto s = sections_.lower_bound(prefix);
  return s != sections_.end() && s->compare(0, prefix.size(), prefix) == 0;
}

const Recipe::Value* Recipe::find(const std::string& key) {
  read_.insert(key);
  auto it = values_.find(key);
  if (it != values_.end()) return &it->second;
  auto d = defaults_.find(key);
  return d == defaults_.end() ? nullptr : &d->second;
}

void Recipe::set_default(const std::string& key, const std::string& literal, const std::string& by) {
  if (values_.count(key)) return;  // the recipe's own value wins
  Value v;
  v.origin = "[" + by + "]'s default for " + key;
  v.by = by;
  toml::table t = toml::parse("v = " + literal);
  v.text = literal_of(*t.get("v"), &v.kind);
  auto it = defaults_.find(key);
  TEMPER_CHECK(it == defaults_.end() || it->second.text == v.text)
      << source_ << ": [" << it->second.by << "] sets the default of " << key << " to " << it->second.text << " and ["
      << by << "] to " << v.text << "; set " << key << " in the recipe to choose";
  defaults_[key] = v;
}

std::string Recipe::default_literal(const std::string& key) const {
  auto it = defaults_.find(key);
  return it == defaults_.end() ? std::string() : it->second.text;
}

std::string Recipe::resolved_literal(const std::string& key) const {
  auto it = resolved_.find(key);
  return it == resolved_.end() ? std::string() : it->second;
}

void Recipe::bad(const std::string& key, const Value& v, const std::string& expected) const {
  TEMPER_FAIL() << v.origin << ": '" << key << "' must be " << expected << ", got " << v.text;
}

void Recipe::record(const std::string& key, const std::string& literal) { resolved_[key] = literal; }

int64_t Recipe::get_int(const std::string& key, int64_t def) {
  const Value* v = find(key);
  int64_t x = def;
  if (v) {
    if (v->kind != "integer") bad(key, *v, "an integer");
    x = std::stoll(v->text);
  }
  record(key, std::to_string(x));
  return x;
}

// A TOML array key whose elements are all T (int64_t or std::string), or `def` when the recipe does not give it;
// recorded as written back.
template <class T>
std::vector<T> Recipe::get_list(const std::string& key, const std::vector<T>& def, const std::string& expected) {
  const Value* v = find(key);
  std::vector<T> x = def;
  if (v) {
    if (v->kind != "array") bad(key, *v, expected);
    toml::table t = toml::parse("v = " + v->text);
    x.clear();
    for (const toml::node& e : *t["v"].as_array()) {
      std::optional<T> got = e.value_exact<T>();
      if (!got) bad(key, *v, expected);
      x.push_back(std::move(*got));
    }
  }
  std::string lit = "[";
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, std::string>)
      lit += (i ? ", " : "") + toml_quote(x[i]);
    else
      lit += (i ? ", " : "") + std::to_string(x[i]);
  }
  record(key, lit + "]");
  return x;
}

std::vector<int64_t> Recipe::get_int_list(const std::string& key, const std::vector<int64_t>& def) {
  return get_list<int64_t>(key, def, "an array of integers");
}

std::vector<std::string> Recipe::get_string_list(const std::string& key, const std::vector<std::string>& def) {
  return get_list<std::string>(key, def, "an array of strings, e.g. [\"python3\", \"reward.py\"]");
}

std::vector<int64_t> Recipe::table_array_indices(const std::string& name) const {
  std::set<int64_t> idx;
  const std::string prefix = name + ".";
  auto add = [&](const std::string& key) {
    if (key.compare(0, prefix.size(), prefix) != 0) return;
    const size_t dot = key.find('.', prefix.size());
    const std::string i = key.substr(prefix.size(), dot == std::string::npos ? std::string::npos : dot - prefix.size());
    if (!i.empty() && i.find_first_not_of("0123456789") == std::string::npos && i.size() < 6) idx.insert(std::stoll(i));
  };
  for (const auto& [k, v] : values_) add(k);
  for (const std::string& s : sections_) add(s);
  return {idx.begin(), idx.end()};
}

double Recipe::get_double(const std::string& key, double def) {
  const Value* v = find(key);
  double x = def;
  if (v) {
    if (v->kind != "integer" && v->kind != "float") bad(key, *v, "a number");
    toml::table t = toml::parse("v = " + v->text);
    x = t["v"].value<double>().value();
    if (!std::isfinite(x)) bad(key, *v, "a finite number");
  }
  record(key, v && v->kind == "integer" ? v->text : toml_float(x));
  return x;
}

float Recipe::get_float(const std::string& key, float def) {
  const float x = static_cast<float>(get_double(key, def));
  const Value* v = find(key);
  record(key, v && v->kind == "integer" ? v->text : toml_float(x, true));  // the float's shortest text
  return x;
}

bool Recipe::get_bool(const std::string& key, bool def) {
  const Value* v = find(key);
  bool x = def;
  if (v) {
    if (v->kind != "boolean") bad(key, *v, "true or false");
    x = v->text == "true";
  }
  record(key, x ? "true" : "false");
  return x;
}

std::string Recipe::get_string(const std::string& key, const std::string& def) {
  const Value* v = find(key);
  std::string x = def;
  if (v) {
    if (v->kind != "string") bad(key, *v, "a string");
    x = unquote(v->text);
  }
  record(key, toml_quote(x));
  return x;
}

std::string Recipe::get_choice(const std::string& key, const std::string& def, const std::vector<std::string>& choices) {
  std::string x = get_string(key, def);
  if (std::find(choices.begin(), choices.end(), x) == choices.end()) {
    const std::string list = join_words(choices, ", ");
    auto it = values_.find(key);
    TEMPER_FAIL() << (it != values_.end() ? it->second.origin : source_) << ": '" << key << "' must be one of " << list
                  << ", got '" << x << "'";
  }
  return x;
}

std::map<std::string, std::string> Recipe::get_table(const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (auto& [k, v] : values_) {
    if (k.rfind(prefix, 0) != 0) continue;
    read_.insert(k);
    out[k.substr(prefix.size())] = v.kind == "string" ? unquote(v.text) : v.text;
    resolved_[k] = v.text;
  }
  return out;
}

void Recipe::check_all_read() const {
  // A section switched off (`enabled = false`) keeps its other settings unread and unchecked, so that turning a
  // method off is one line.
  auto switched_off = [&](const std::string& k) {
    for (size_t dot = k.find('.'); dot != std::string::npos; dot = k.find('.', dot + 1)) {
      auto it = values_.find(k.substr(0, dot) + ".enabled");
      if (it != values_.end() && it->first != k && it->second.kind == "boolean" && it->second.text == "false")
        return true;
    }
    return false;
  };
  for (auto& [k, v] : values_) {
    if (read_.count(k) || switched_off(k)) continue;
    std::string section = k.substr(0, k.find('.') == std::string::npos ? 0 : k.find('.') + 1), known;
    for (auto& [rk, lit] : resolved_)
      if (section.empty() ? rk.find('.') == std::string::npos : rk.rfind(section, 0) == 0) known += " " + rk;
    TEMPER_FAIL() << v.origin << ": unknown key '" << k << "'" << (known.empty() ? std::string(" (no such section)") : "; known:" + known);
  }
}

namespace {

// "[rl.stare]"; an array of tables' element "reward.0" is "[[reward]]" and its sub-table "reward.0.judge"
// "[reward.judge]" (which TOML gives to the array's last element: sections come in key order).
std::string section_header(const std::string& sec) {
  const size_t dot = sec.find('.');
  if (dot != std::string::npos) {
    const size_t end = sec.find('.', dot + 1);
    const std::string idx = sec.substr(dot + 1, end == std::string::npos ? std::string::npos : end - dot - 1);
    if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos)
      return end == std::string::npos ? "[[" + sec.substr(0, dot) + "]]"
                                      : "[" + sec.substr(0, dot) + sec.substr(end) + "]";
  }
  return "[" + sec + "]";
}

}  // namespace

std::string Recipe::resolved_toml(bool given_only) const {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sections;
  size_t left_out = 0;
  for (auto& [k, lit] : resolved_) {
    if (given_only && !values_.count(k) && !defaults_.count(k)) {
      ++left_out;
      continue;
    }
    size_t dot = k.rfind('.');
    sections[dot == std::string::npos ? "" : k.substr(0, dot)].push_back({dot == std::string::npos ? k : k.substr(dot + 1), lit});
  }
  std::string out = given_only ? "# temper: the recipe's settings (" + std::to_string(left_out) +
                                     " more at their defaults: config.toml holds every setting)\n"
                               : "# temper: the resolved recipe (every setting, defaults included)\n";
  for (auto& [sec, kv] : sections) {
    if (!sec.empty()) out += "\n" + section_header(sec) + "\n";
    for (auto& [k, lit] : kv) out += k + " = " + lit + "\n";
  }
  return out;
}

}  // namespace temper::app
