// Template evaluation (see interpreter.h): statements write to one output string (a capture swaps
// it for set blocks, filter blocks and macros); expressions evaluate to Values with Python's
// operator semantics. Every failure is an EvalError caught once at the top, where the position of
// the node being evaluated turns it into temper::Error.
#include "temper/text/jinja/interpreter.h"

#include <cmath>

#include "temper/core/error.h"
#include "temper/text/jinja/builtins.h"

namespace temper::text::jinja {

namespace {

struct Scope {
  Dict vars;
  Scope* parent = nullptr;

  const Value* find(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (const Value* v = s->vars.find(n)) return v;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

[[noreturn]] void undefined_error(const Value& u) {
  throw EvalError(u.as_string().empty() ? "a value is undefined" : u.as_string());
}

[[noreturn]] void type_error(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw EvalError(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" +
                  type_name(b) + "'");
}

[[noreturn]] void overflow() {
  throw EvalError("integer overflow (Python's integers are unbounded; this interpreter's are 64-bit)");
}

template <class Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) overflow();
  return r;
}

bool add_overflow(int64_t x, int64_t y, int64_t* r) {
  return __builtin_add_overflow(x, y, r);
}
bool sub_overflow(int64_t x, int64_t y, int64_t* r) {
  return __builtin_sub_overflow(x, y, r);
}
bool mul_overflow(int64_t x, int64_t y, int64_t* r) {
  return __builtin_mul_overflow(x, y, r);
}

Value repeat(const Value& seq, int64_t n) {
  // Checked before building: 16 MiB of text, 2^20 items.
  const int64_t limit = seq.is_string() ? (16 << 20) : (1 << 20);
  if (n > 0 && n > limit / std::max<int64_t>(length(seq), 1)) throw EvalError("repetition result too large");
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return out;
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
}

Value arith(const std::string& op, const Value& a, const Value& b) {
  const char* o = op.c_str();
  if (op == "~") return to_str(a) + to_str(b);
  if (a.is_number() && b.is_number()) {
    const bool ints = !a.is_float() && !b.is_float();
    const int64_t x = a.as_int(), y = b.as_int();
    const double p = a.as_double(), q = b.as_double();
    if (op == "+") return ints ? Value(checked(add_overflow, x, y)) : Value(p + q);
    if (op == "-") return ints ? Value(checked(sub_overflow, x, y)) : Value(p - q);
    if (op == "*") return ints ? Value(checked(mul_overflow, x, y)) : Value(p * q);
    if ((op == "/" || op == "//" || op == "%") && q == 0) throw EvalError("division or modulo by zero");
    if (op == "/") return p / q;
    if (op == "//") {
      if (!ints) return std::floor(p / q);
      if (x == INT64_MIN && y == -1) overflow();
      const int64_t d = x / y;
      return (x % y != 0 && ((x < 0) != (y < 0))) ? d - 1 : d;
    }
    if (op == "%") {
      if (!ints) {
        const double m = std::fmod(p, q);
        return m != 0 && ((m < 0) != (q < 0)) ? m + q : m;
      }
      if (y == -1) return int64_t{0};
      const int64_t m = x % y;
      return m != 0 && ((m < 0) != (y < 0)) ? m + y : m;
    }
    if (op == "**") {
      if (ints && y >= 0) {
        int64_t acc = 1, base = x;  // by squaring: 1 ** 10**18 must not loop
        for (int64_t e = y; e > 0; e >>= 1) {
          if (e & 1) acc = checked(mul_overflow, acc, base);
          if (e > 1) base = checked(mul_overflow, base, base);
        }
        return acc;
      }
      if (p == 0 && q < 0) throw EvalError("0.0 cannot be raised to a negative power");
      return std::pow(p, q);
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    if (!a.is_markup() && !b.is_markup()) return a.as_string() + b.as_string();
    // Markup + str escapes the str (markupsafe's __add__/__radd__).
    auto safe = [](const Value& v) { return v.is_markup() ? v.as_string() : html_escape(v.as_string()); };
    return Value::markup(safe(a) + safe(b));
  }
  if (a.is_generator() || b.is_generator()) type_error(o, a, b);
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  if (op == "%" && a.is_string()) {
    // A dict or list operand is a mapping to Python's %: no error when nothing refers to it.
    if ((b.is_dict() || (b.is_list() && !b.is_tuple())) && a.as_string().find('%') == std::string::npos) return a;
    CallArgs args;
    args.args = b.is_tuple() ? b.as_list() : List{b};
    return apply_filter("format", a, args);
  }
  type_error(o, a, b);
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return !less(b, a);
  return !less(a, b);  // >=
}

std::optional<int64_t> slice_index(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_int() && !v.is_bool()) throw EvalError("slice indices must be integers or None, not " + type_name(v));
  return v.as_int();
}

class Interpreter {
 public:
  Interpreter(const std::string& name, const Dict& globals, const Limits& limits) : name_(name), lim_(limits) {
    globals_.vars = builtin_globals();
    for (const auto& [k, v] : globals.items) globals_.vars.set(k, v);
    root_.parent = &globals_;
  }

  std::string run(const Body& body) {
    std::string out;
    out_ = &out;
    try {
      exec_body(body, root_);
    } catch (const EvalError& e) {
      if (e.raised) {
        TEMPER_FAIL() << name_ << ":" << pos_.line << ":" << pos_.col
                      << ": the template raised an exception: " << e.what();
      }
      TEMPER_FAIL() << name_ << ":" << pos_.line << ":" << pos_.col << ": " << e.what();
    }
    return out;
  }

 private:
  void write(std::string_view s) {
    out_->append(s);
    if (out_->size() > lim_.max_output_bytes) {
      throw EvalError("output exceeds " + std::to_string(lim_.max_output_bytes) + " bytes (the render limit)");
    }
  }

  std::string capture(const Body& body, Scope& scope) {
    std::string buf;
    std::string* saved = std::exchange(out_, &buf);
    try {
      exec_body(body, scope);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buf;
  }

  Flow exec_body(const Body& body, Scope& scope) {
    for (const StmtPtr& s : body) {
      const Flow f = exec(*s, scope);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, Scope& scope) {
    pos_ = s.pos;
    switch (s.kind) {
      case StmtKind::kText:
        write(s.text);
        break;
      case StmtKind::kOutput:
        write(to_str(eval(*s.exprs[0], scope)));
        break;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.bodies.size(); ++i) {
          if (i == s.exprs.size() || truthy(eval(*s.exprs[i], scope))) return exec_body(s.bodies[i], scope);
        }
        break;
      case StmtKind::kFor:
        exec_for(s, scope);
        break;
      case StmtKind::kSet:
        assign(s, eval(*s.exprs[0], scope), scope);
        break;
      case StmtKind::kSetBlock: {
        Scope inner{{}, &scope};
        Value v = capture(s.bodies[0], inner);
        if (s.exprs[0]) v = eval_with_block(*s.exprs[0], std::move(v), scope);
        assign(s, std::move(v), scope);
        break;
      }
      case StmtKind::kMacro:
        scope.vars.set(s.text, make_macro(s));
        break;
      case StmtKind::kCallBlock:
        write(to_str(call_block(s, scope)));
        break;
      case StmtKind::kFilterBlock: {
        Scope inner{{}, &scope};
        Value body = capture(s.bodies[0], inner);
        write(to_str(eval_with_block(*s.exprs[0], std::move(body), scope)));
        break;
      }
      case StmtKind::kScope: {
        Scope inner{{}, &scope};
        exec_body(s.bodies[0], inner);
        break;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void bind(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars.set(targets[0], v);
      return;
    }
    const List items = iterate(v);
    if (items.size() != targets.size()) {
      throw EvalError("cannot unpack " + std::to_string(items.size()) + " values into " +
                      std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < items.size(); ++i) scope.vars.set(targets[i], items[i]);
  }

  void assign(const Stmt& s, Value v, Scope& scope) {
    if (s.attr.empty()) {
      bind(s.targets, v, scope);
      return;
    }
    const Value* ns = scope.find(s.targets[0]);
    if (!ns || !ns->is_namespace()) {
      throw EvalError("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] +
                      "': it is not a namespace() object");
    }
    if (v.is_namespace()) throw EvalError("a namespace() can only be a variable, not a namespace's attribute");
    ns->namespace_dict().set(s.attr, std::move(v));
  }

  void count_iteration() {
    if (++iterations_ > lim_.max_iterations) {
      throw EvalError("more than " + std::to_string(lim_.max_iterations) + " loop iterations (the render limit)");
    }
  }

  void exec_for(const Stmt& s, Scope& scope) {
    List items = iterate(eval(*s.exprs[0], scope));
    if (s.exprs[1]) {
      List kept;
      for (Value& x : items) {
        count_iteration();
        Scope probe{{}, &scope};
        bind(s.targets, x, probe);
        if (truthy(eval(*s.exprs[1], probe))) kept.push_back(std::move(x));
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      count_iteration();
      pos_ = s.pos;
      Scope it{{}, &scope};
      it.vars.items.reserve(s.targets.size() + 1);
      bind(s.targets, items[i], it);
      it.vars.set("loop", loop_object(items, i));
      if (exec_body(s.bodies[0], it) == Flow::kBreak) break;
    }
    if (n == 0 && !s.bodies[1].empty()) {
      Scope inner{{}, &scope};
      exec_body(s.bodies[1], inner);
    }
  }

  static Value loop_object(const List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Dict d;
    d.items.reserve(12);
    d.items.emplace_back("index", i + 1);
    d.items.emplace_back("index0", i);
    d.items.emplace_back("revindex", n - i);
    d.items.emplace_back("revindex0", n - i - 1);
    d.items.emplace_back("first", i == 0);
    d.items.emplace_back("last", i == n - 1);
    d.items.emplace_back("length", n);
    d.items.emplace_back("depth", 1);
    d.items.emplace_back("depth0", 0);
    d.items.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    d.items.emplace_back("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    d.items.emplace_back("cycle", Value::callable("loop.cycle", [i](CallArgs& a) {
                           if (a.args.empty()) throw EvalError("no items for cycling given");
                           return a.args[i % a.args.size()];
                         }));
    return Value(std::move(d));
  }

  Value make_macro(const Stmt& s) {
    return Value::callable(s.text, [this, &s](CallArgs& a) { return call_macro(s, a); });
  }

  Value call_macro(const Stmt& m, CallArgs& a) {
    if (++depth_ > lim_.max_depth) {
      --depth_;
      throw EvalError("macro calls nested deeper than " + std::to_string(lim_.max_depth) + " (the render limit)");
    }
    struct Unwind {
      int& d;
      ~Unwind() { --d; }
    } unwind{depth_};
    if (a.args.size() > m.targets.size()) {
      throw EvalError("macro '" + m.text + "' takes " + std::to_string(m.targets.size()) + " arguments, " +
                      std::to_string(a.args.size()) + " given");
    }
    Scope scope{{}, &root_};
    for (const auto& [k, v] : a.kwargs) {
      if (k == "caller") {
        scope.vars.set(k, v);
      } else if (std::find(m.targets.begin(), m.targets.end(), k) == m.targets.end()) {
        throw EvalError("macro '" + m.text + "' has no parameter '" + k + "'");
      }
    }
    for (size_t i = 0; i < m.targets.size(); ++i) {
      const Value* v = a.get(i, m.targets[i]);
      if (v) {
        scope.vars.set(m.targets[i], *v);
      } else {
        scope.vars.set(m.targets[i],
                       m.exprs[i] ? eval(*m.exprs[i], scope) : Value::undefined("'" + m.targets[i] + "' is undefined"));
      }
    }
    const Pos saved = pos_;
    Value out = capture(m.bodies[0], scope);
    pos_ = saved;
    return out;
  }

  Value call_block(const Stmt& s, Scope& scope) {
    const Expr& call = *s.exprs[0];
    Value callee = eval(*call.kids[0], scope);
    CallArgs args = eval_args(call, scope);
    args.kwargs.emplace_back("caller", Value::callable("caller", [this, &s, &scope](CallArgs&) {
                               Scope inner{{}, &scope};
                               return Value(capture(s.bodies[0], inner));
                             }));
    if (!callee.is_callable()) throw EvalError("'" + type_name(callee) + "' object is not callable");
    return callee.as_callable().fn(args);
  }

  // A filter chain whose innermost subject is a captured block ({% filter %}, {% set x | f %}).
  Value eval_with_block(const Expr& e, Value block, Scope& scope) {
    Value subject = e.kids[0] ? eval_with_block(*e.kids[0], std::move(block), scope) : std::move(block);
    CallArgs args = eval_args(e, scope);
    pos_ = e.pos;
    return apply_filter(e.name, subject, args);
  }

  CallArgs eval_args(const Expr& e, Scope& scope) {
    CallArgs a;
    const size_t nkw = e.keys.size(), n = e.kids.size();
    for (size_t i = 1; i < n - nkw; ++i) a.args.push_back(eval(*e.kids[i], scope));
    for (size_t i = 0; i < nkw; ++i) a.kwargs.emplace_back(e.keys[i], eval(*e.kids[n - nkw + i], scope));
    return a;
  }

  Value eval(const Expr& e, Scope& scope) {
    pos_ = e.pos;
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.value;
      case ExprKind::kName: {
        const Value* v = scope.find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        List l;
        l.reserve(e.kids.size());
        for (const ExprPtr& k : e.kids) l.push_back(eval(*k, scope));
        return e.kind == ExprKind::kTuple ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case ExprKind::kDict:
        return eval_dict(e, scope);
      case ExprKind::kUnary:
        return eval_unary(e, scope);
      case ExprKind::kBinary: {
        Value a = eval(*e.kids[0], scope);
        Value b = eval(*e.kids[1], scope);
        pos_ = e.pos;
        return bounded(arith(e.name, a, b));
      }
      case ExprKind::kAnd: {
        Value a = eval(*e.kids[0], scope);
        return truthy(a) ? eval(*e.kids[1], scope) : a;
      }
      case ExprKind::kOr: {
        Value a = eval(*e.kids[0], scope);
        return truthy(a) ? a : eval(*e.kids[1], scope);
      }
      case ExprKind::kCompare:
        return eval_compare(e, scope);
      case ExprKind::kCond:
        if (truthy(eval(*e.kids[1], scope))) return eval(*e.kids[0], scope);
        return e.kids[2] ? eval(*e.kids[2], scope) : Value::undefined("the conditional expression has no else");
      case ExprKind::kGetAttr: {
        Value obj = eval(*e.kids[0], scope);
        pos_ = e.pos;
        return get_attr(obj, e.name);
      }
      case ExprKind::kGetItem: {
        Value obj = eval(*e.kids[0], scope);
        Value key = eval(*e.kids[1], scope);
        pos_ = e.pos;
        return get_item(obj, key);
      }
      case ExprKind::kSlice:
        return eval_slice(e, scope);
      case ExprKind::kCall:
        return eval_call(e, scope);
      case ExprKind::kFilter: {
        Value subject = eval(*e.kids[0], scope);
        CallArgs args = eval_args(e, scope);
        pos_ = e.pos;
        return bounded(apply_filter(e.name, subject, args));
      }
      case ExprKind::kTest: {
        Value subject = eval(*e.kids[0], scope);
        CallArgs args = eval_args(e, scope);
        pos_ = e.pos;
        return apply_test(e.name, subject, args) != e.negated;
      }
    }
    return Value();
  }

  Value eval_dict(const Expr& e, Scope& scope) {
    Dict d;
    for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
      Value k = eval(*e.kids[i], scope);
      if (k.is_list() || k.is_dict() || k.is_namespace() || k.is_undefined()) {
        throw EvalError("unhashable type: '" + type_name(k) + "' as a dict key");
      }
      d.set(std::move(k), eval(*e.kids[i + 1], scope));
    }
    return Value(std::move(d));
  }

  Value eval_unary(const Expr& e, Scope& scope) {
    Value v = eval(*e.kids[0], scope);
    pos_ = e.pos;
    if (e.name == "not") return !truthy(v);
    if (v.is_undefined()) undefined_error(v);
    if (!v.is_number()) throw EvalError("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
    if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
    if (v.is_float()) return -v.as_double();
    return checked(sub_overflow, 0, v.as_int());
  }

  Value eval_compare(const Expr& e, Scope& scope) {
    Value left = eval(*e.kids[0], scope);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.kids[i + 1], scope);
      pos_ = e.pos;
      if (!compare(e.ops[i], left, right)) return false;
      left = std::move(right);
    }
    return true;
  }

  Value eval_slice(const Expr& e, Scope& scope) {
    Value obj = eval(*e.kids[0], scope);
    std::optional<int64_t> idx[3];
    for (int i = 0; i < 3; ++i) {
      if (e.kids[i + 1]) idx[i] = slice_index(eval(*e.kids[i + 1], scope));
    }
    pos_ = e.pos;
    return get_slice(obj, idx[0], idx[1], idx[2]);
  }

  Value eval_call(const Expr& e, Scope& scope) {
    Value callee = eval(*e.kids[0], scope);
    CallArgs args = eval_args(e, scope);
    pos_ = e.pos;
    if (callee.is_undefined()) undefined_error(callee);
    if (!callee.is_callable()) throw EvalError("'" + type_name(callee) + "' object is not callable");
    return bounded(callee.as_callable().fn(args));
  }

  // A string built without being written (`{% set ns.s = ns.s ~ ns.s %}` in a loop) is held to the
  // output bound too, a list to the loop bound.
  Value bounded(Value v) const {
    if (v.is_string() && v.as_string().size() > lim_.max_output_bytes) {
      throw EvalError("a string of " + std::to_string(v.as_string().size()) + " bytes exceeds the render limit of " +
                      std::to_string(lim_.max_output_bytes));
    }
    if (v.is_list() && static_cast<int64_t>(v.as_list().size()) > lim_.max_iterations) {
      throw EvalError("a list of " + std::to_string(v.as_list().size()) + " items exceeds the render limit of " +
                      std::to_string(lim_.max_iterations) + " (the loop bound)");
    }
    return v;
  }

  const std::string& name_;
  const Limits& lim_;
  Scope globals_, root_;
  std::string* out_ = nullptr;
  int64_t iterations_ = 0;
  int depth_ = 0;
  Pos pos_;
};

}  // namespace

std::string interpret(const Body& body, const std::string& name, const Dict& globals, const Limits& limits) {
  return Interpreter(name, globals, limits).run(body);
}

}  // namespace temper::text::jinja
