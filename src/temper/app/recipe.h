// Recipes: a TOML file (recipes/*.toml, or the built-in quickstart) flattened to dotted keys
// ("rl.lr", "task.params.max_ops"), then `--set key=value` overrides, then read by typed getters
// that fill the config structs with their defaults. Every key a recipe gives must be read: an
// unknown or mistyped key is an error naming the file, the key and the known keys of its section.
// The resolved recipe (every key read, with its final value) is printed and saved as config.toml.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace temper::app {

class Recipe {
 public:
  static Recipe parse(const std::string& toml_text, const std::string& source);  // source: file name for errors
  static Recipe load(const std::string& path);
  // "key=value": the value is TOML (1e-4, true, "text") or, if it is not valid TOML, taken as a string.
  void set(const std::string& assignment);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  bool has_prefix(const std::string& prefix) const;  // any key under "section." given
  int64_t get_int(const std::string& key, int64_t def);
  double get_double(const std::string& key, double def);
  bool get_bool(const std::string& key, bool def);
  std::string get_string(const std::string& key, const std::string& def);
  std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& def);  // [1, 2, 3]
  std::string get_choice(const std::string& key, const std::string& def, const std::vector<std::string>& choices);
  // Every key under prefix (e.g. "task.params."), as text, prefix removed; all marked read.
  std::map<std::string, std::string> get_table(const std::string& prefix);
  // Throws naming unknown keys (given but never read).
  void check_all_read() const;
  // The resolved recipe as TOML: the keys read, with their values (defaults included).
  std::string resolved_toml() const;
  const std::string& source() const { return source_; }

 private:
  struct Value {
    std::string text;    // TOML literal: 1, 1.5, true, "str", [1, 2]
    std::string kind;    // integer, float, boolean, string, array
    std::string origin;  // "file:line" or "--set"
  };
  const Value* find(const std::string& key);
  [[noreturn]] void bad(const std::string& key, const Value& v, const std::string& expected) const;
  void record(const std::string& key, const std::string& literal);

  std::string source_;
  std::map<std::string, Value> values_;
  std::set<std::string> read_;
  std::set<std::string> sections_;  // every table's prefix ("rl.stare."), empty ones included
  std::map<std::string, std::string> resolved_;  // key -> TOML literal
};

std::string toml_quote(const std::string& s);

}  // namespace temper::app
