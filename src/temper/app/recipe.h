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

#include "temper/core/error.h"
#include "temper/core/settings.h"

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
  float get_float(const std::string& key, float def);  // recorded as the shortest text that reads back to it
  bool get_bool(const std::string& key, bool def);
  std::string get_string(const std::string& key, const std::string& def);
  std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& def);  // [1, 2, 3]
  std::vector<std::string> get_string_list(const std::string& key, const std::vector<std::string>& def);  // ["a", "b"]
  // The indices i of an array of tables ([[name]]: keys "name.<i>.*"), in order.
  std::vector<int64_t> table_array_indices(const std::string& name) const;
  std::string get_choice(const std::string& key, const std::string& def, const std::vector<std::string>& choices);
  // Every key under prefix (e.g. "task.params."), as text, prefix removed; all marked read.
  std::map<std::string, std::string> get_table(const std::string& prefix);
  // A default set by another section (a method's: ZPPO sets rl.epochs = 4): used when the recipe does not
  // give `key`, ahead of the reader's own. Two sections setting different defaults for one key is an error
  // that names both and the way out (set the key).
  void set_default(const std::string& key, const std::string& literal, const std::string& by);
  // The literal `key` resolved to (empty if not read), and the default another section set for it (empty: none).
  std::string resolved_literal(const std::string& key) const;
  std::string default_literal(const std::string& key) const;
  // Throws naming unknown keys (given but never read).
  void check_all_read() const;
  // The resolved recipe as TOML: the keys read, with their values (defaults included); with `given_only`, only the
  // keys the recipe (or --set, or a method's changed default) gave, and a comment counting the rest.
  std::string resolved_toml(bool given_only = false) const;
  const std::string& source() const { return source_; }
  // Every key read, with the TOML literal it resolved to (what config.toml records).
  const std::map<std::string, std::string>& resolved() const { return resolved_; }

 private:
  struct Value {
    std::string text;    // TOML literal: 1, 1.5, true, "str", [1, 2]
    std::string kind;    // integer, float, boolean, string, array
    std::string origin;  // "file:line" or "--set"
    std::string by;      // set_default: the section that set it
  };
  const Value* find(const std::string& key);
  [[noreturn]] void bad(const std::string& key, const Value& v, const std::string& expected) const;
  void record(const std::string& key, const std::string& literal);
  template <class T>
  std::vector<T> get_list(const std::string& key, const std::vector<T>& def, const std::string& expected);

  std::string source_;
  std::map<std::string, Value> values_;
  std::map<std::string, Value> defaults_;  // set_default: origin = the section that set it
  std::set<std::string> read_;
  std::set<std::string> sections_;  // every table's prefix ("rl.stare."), empty ones included
  std::map<std::string, std::string> resolved_;  // key -> TOML literal
};

std::string toml_quote(const std::string& s);

// Reads one section of a recipe into a config struct through its declaration (`visit`, core/settings.h).
class RecipeReader final : public KeyVisitor {
 public:
  RecipeReader(Recipe& r, std::string prefix) : r_(r), prefix_(std::move(prefix)) {}
  void value(std::string_view k, int64_t& f, std::string_view) override { f = r_.get_int(key(k), f); }
  void value(std::string_view k, double& f, std::string_view) override { f = r_.get_double(key(k), f); }
  void value(std::string_view k, float& f, std::string_view) override { f = r_.get_float(key(k), f); }
  void value(std::string_view k, bool& f, std::string_view) override { f = r_.get_bool(key(k), f); }
  void value(std::string_view k, std::string& f, std::string_view) override { f = r_.get_string(key(k), f); }
  void value(std::string_view k, std::vector<int64_t>& f, std::string_view) override { f = r_.get_int_list(key(k), f); }
  void strings(std::string_view k, std::vector<std::string>& f, std::string_view) override {
    f = r_.get_string_list(key(k), f);
  }
  void choice(std::string_view k, std::string& f, std::string_view, const std::vector<std::string>& choices) override {
    f = r_.get_choice(key(k), f, choices);
  }

 private:
  std::string key(std::string_view k) const { return prefix_ + std::string(k); }
  Recipe& r_;
  std::string prefix_;
};

// Reads section `prefix` ("rl.", "rl.stare.") through `visit(KeyVisitor&)`; an error in it (a bad list,
// a failed validation inside) names the recipe and the section.
template <class F>
void read_section(Recipe& r, const std::string& prefix, F&& visit) {
  RecipeReader reader(r, prefix);
  try {
    visit(reader);
  } catch (const Error& e) {
    TEMPER_FAIL() << r.source() << ": [" << prefix.substr(0, prefix.size() - 1) << "]: " << e.what();
  }
}

}  // namespace temper::app
