// The values a Jinja template computes with: undefined, none, bool, int, float, string, list, dict
// (string keys, insertion order), callable (builtins and macros) and namespace (the one mutable kind).
// Conversions follow Python where output bytes depend on them: str() and repr() of every kind,
// equality across int/float/bool, truthiness. Leaves out: sets, non-string dict keys, big integers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace temper::text::jinja {

// A template-level failure (a builtin's TypeError, a bound reached); the interpreter adds the
// template's line:col and turns it into temper::Error.
struct EvalError : std::runtime_error {
  explicit EvalError(const std::string& what, bool raised = false) : std::runtime_error(what), raised(raised) {}
  bool raised;  // raise_exception() from the template itself
};

class Value;
using List = std::vector<Value>;

// Keys are strings in everything a conversation brings; templates may write {0: 1} too.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  const Value* find(const Value& key) const;  // Python's key equality (1 == 1.0 == True)
  void set(Value key, Value v);
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The argument at `pos` or named `name`, else nullptr; kwargs win (Python would refuse both).
  const Value* get(size_t pos, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable, kNamespace };

  Value() = default;  // undefined
  static Value undefined(std::string name) {
    Value v;
    v.str_ = std::move(name);
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), int_(b) {}                      // NOLINT: implicit like Python literals
  Value(int v) : kind_(Kind::kInt), int_(v) {}                        // NOLINT
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}                    // NOLINT
  Value(double v) : kind_(Kind::kFloat), float_(v) {}                 // NOLINT
  Value(std::string s) : kind_(Kind::kString), str_(std::move(s)) {}  // NOLINT
  Value(std::string_view s) : kind_(Kind::kString), str_(s) {}        // NOLINT
  Value(const char* s) : kind_(Kind::kString), str_(s) {}             // NOLINT
  // Containers nest at most kMaxNesting deep (an EvalError beyond): printing, comparing and freeing
  // them recurses.
  static constexpr int kMaxNesting = 256;
  Value(List l);  // NOLINT: implicit like Python literals
  Value(Dict d);  // NOLINT
  static Value tuple(List l) { return flagged(Value(std::move(l)), Flag::kTuple); }
  static Value generator(List l) { return flagged(Value(std::move(l)), Flag::kGenerator); }
  // A generator whose iteration raises `error` (what Jinja's filters do on a non-iterable).
  static Value failing_generator(std::string error) {
    Value v = generator({});
    v.str_ = std::move(error);
    return v;
  }
  static Value markup(std::string s) { return flagged(Value(std::move(s)), Flag::kMarkup); }
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);
  static Value make_namespace(Dict d);

  Kind kind() const { return kind_; }
  int nesting() const { return nesting_; }  // 0 for scalars, 1 + the deepest item for containers
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }  // lists and tuples
  bool is_tuple() const { return flag_ == Flag::kTuple; }
  // A lazy sequence (Jinja's map/select/items... return generators): iterable, always true, no
  // len(), no subscript, not JSON.
  bool is_generator() const { return flag_ == Flag::kGenerator; }
  // markupsafe.Markup (|safe, |e): `+` with a plain string escapes the plain one.
  bool is_markup() const { return flag_ == Flag::kMarkup; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // bool and int
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }  // string (and markup); for undefined: its message
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }  // dict and namespace
  Dict& namespace_dict() const { return *dict_; }
  const Callable& as_callable() const { return *callable_; }

 private:
  enum class Flag : uint8_t { kNone, kTuple, kGenerator, kMarkup };
  explicit Value(Kind k) : kind_(k) {}
  static Value flagged(Value v, Flag f) {
    v.flag_ = f;
    return v;
  }
  Kind kind_ = Kind::kUndefined;
  Flag flag_ = Flag::kNone;
  uint16_t nesting_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> callable_;
};

// Python's type names ("str", "int", "NoneType", "list", "dict", "undefined").
std::string type_name(const Value& v);

bool truthy(const Value& v);

// Python ==: 1 == 1.0 == True, dicts regardless of order, undefined equal only to undefined.
bool equal(const Value& a, const Value& b);

// Python <: numbers with numbers, strings by code point, lists lexicographically; else EvalError.
bool less(const Value& a, const Value& b);

// Python str(): what {{ x }} writes (undefined writes nothing) and what ~ concatenates. A generator
// is an EvalError (Python would print its address).
std::string to_str(const Value& v);

// Python repr(): strings quoted as Python quotes them; what str() of a list or dict shows.
std::string repr(const Value& v);

// Python's repr of a float ("1.0", "1e-05", "1e+16", "inf").
std::string float_repr(double x);

}  // namespace temper::text::jinja
