// Settings declared once: a config struct names its recipe keys in one `visit(KeyVisitor&)` (the key,
// the field, a one-line doc and, for an enum, its name table); the default is the field's value when it
// is visited (its initialiser, or a default the struct derives just before). Reading a recipe, writing
// the resolved config.toml and listing every key (`temper train --list-keys`) are visitors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace temper {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// The names of an enum's values: one table per enum, beside the enum.
template <class E, size_t N>
using EnumNames = std::array<EnumName<E>, N>;

template <class E, size_t N>
std::string_view enum_name(const EnumNames<E, N>& names, E v) {
  for (const auto& n : names)
    if (n.value == v) return n.name;
  return "?";
}

template <class E, size_t N>
std::optional<E> enum_from_name(const EnumNames<E, N>& names, std::string_view s) {
  for (const auto& n : names)
    if (n.name == s) return n.value;
  return std::nullopt;
}

template <class E, size_t N>
std::vector<std::string> enum_names(const EnumNames<E, N>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) out.emplace_back(n.name);
  return out;
}

// A number as TOML writes it: the shortest text that reads back to v (as a float with `single`), always with
// '.', 'e' or inf/nan (20 -> 20.0, 0.003 -> 0.003, 1e-05 -> 1e-05).
std::string toml_float(double v, bool single = false);

// A comma-separated list as one string key ("0.7,0.3", "correct,brevity"), as recipes write them.
std::string join_numbers(const std::vector<double>& v);
std::vector<double> split_numbers(const std::string& text, const std::string& what);  // throws naming `what`
std::string join_words(const std::vector<std::string>& v, std::string_view sep = ",");
std::vector<std::string> split_words(const std::string& text);

class KeyVisitor {
 public:
  virtual ~KeyVisitor() = default;
  virtual void value(std::string_view key, int64_t& f, std::string_view doc) = 0;
  virtual void value(std::string_view key, double& f, std::string_view doc) = 0;
  virtual void value(std::string_view key, float& f, std::string_view doc) = 0;
  virtual void value(std::string_view key, bool& f, std::string_view doc) = 0;
  virtual void value(std::string_view key, std::string& f, std::string_view doc) = 0;
  virtual void value(std::string_view key, std::vector<int64_t>& f, std::string_view doc) = 0;
  // A list of strings (a TOML array: a command's argv).
  virtual void strings(std::string_view key, std::vector<std::string>& f, std::string_view doc) = 0;
  // A string limited to `choices` (an enum's names).
  virtual void choice(std::string_view key, std::string& f, std::string_view doc,
                      const std::vector<std::string>& choices) = 0;

  void operator()(std::string_view key, int64_t& f, std::string_view doc) { value(key, f, doc); }
  void operator()(std::string_view key, double& f, std::string_view doc) { value(key, f, doc); }
  void operator()(std::string_view key, float& f, std::string_view doc) { value(key, f, doc); }
  void operator()(std::string_view key, bool& f, std::string_view doc) { value(key, f, doc); }
  void operator()(std::string_view key, std::string& f, std::string_view doc) { value(key, f, doc); }
  void operator()(std::string_view key, std::vector<int64_t>& f, std::string_view doc) { value(key, f, doc); }
  void operator()(std::string_view key, int& f, std::string_view doc) {
    int64_t x = f;
    value(key, x, doc);
    f = static_cast<int>(x);
  }
  void operator()(std::string_view key, uint64_t& f, std::string_view doc) {
    int64_t x = static_cast<int64_t>(f);
    value(key, x, doc);
    f = static_cast<uint64_t>(x);
  }
  // Comma lists kept as one string key.
  void operator()(std::string_view key, std::vector<double>& f, std::string_view doc);
  void operator()(std::string_view key, std::vector<std::string>& f, std::string_view doc);
  template <class E, size_t N>
  void operator()(std::string_view key, E& f, std::string_view doc, const EnumNames<E, N>& names) {
    std::string s(enum_name(names, f));
    choice(key, s, doc, enum_names(names));
    f = enum_from_name(names, s).value_or(f);
  }
};

}  // namespace temper
