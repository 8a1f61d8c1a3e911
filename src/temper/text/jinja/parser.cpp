// Jinja2 parser (see parser.h): recursive descent over the lexer's tokens, one function per
// precedence level as in jinja2/parser.py.
#include "temper/text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "temper/core/error.h"

namespace temper::text::jinja {

namespace {

constexpr int kMaxNesting = 128;  // brackets, unary operators and nested tags

class Parser {
 public:
  Parser(const std::vector<Token>& toks, const std::string& name) : t_(toks), name_(name) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, end);
    if (peek().kind != Tok::kEof) fail(peek().pos, "unexpected tag");
    return body;
  }

 private:
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == Tok::kOp && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == Tok::kName && peek(k).text == n; }

  [[noreturn]] void fail(Pos p, const std::string& msg) const {
    TEMPER_FAIL() << name_ << ":" << p.line << ":" << p.col << ": " << msg;
  }

  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Tok::kEof:
        return "end of template";
      case Tok::kBlockEnd:
        return "end of tag '%}'";
      case Tok::kVarEnd:
        return "end of print '}}'";
      case Tok::kString:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }

  void expect_op(const char* op) {
    if (!is_op(op)) fail(peek().pos, std::string("expected '") + op + "', found " + describe(peek()));
    next();
  }
  void expect(Tok kind, const char* what) {
    if (peek().kind != kind) fail(peek().pos, std::string("expected ") + what + ", found " + describe(peek()));
    next();
  }
  std::string expect_name() {
    if (peek().kind != Tok::kName) fail(peek().pos, "expected a name, found " + describe(peek()));
    return next().text;
  }

  struct DepthGuard {
    DepthGuard(Parser& p, Pos pos) : p(p) {
      if (++p.depth_ > kMaxNesting) p.fail(pos, "nesting deeper than " + std::to_string(kMaxNesting));
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  static ExprPtr node(ExprKind k, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = pos;
    return e;
  }

  // ---- statements -------------------------------------------------------------------------

  // Parses until one of `ends` opens a tag (consumed with its name; stored in `end`) or the end.
  Body parse_body(std::initializer_list<const char*> ends, std::string& end) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::kEof) {
        if (ends.size()) fail(t.pos, std::string("missing '") + *(ends.end() - 1) + "' tag: the template ends first");
        return body;
      }
      if (t.kind == Tok::kText) {
        auto s = std::make_unique<Stmt>(Stmt{StmtKind::kText, t.pos, t.text, {}, {}, {}, {}});
        body.push_back(std::move(s));
        next();
      } else if (t.kind == Tok::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>(Stmt{StmtKind::kOutput, t.pos, {}, {}, {}, {}, {}});
        s->exprs.push_back(parse_tuple(true));
        expect(Tok::kVarEnd, "'}}'");
        body.push_back(std::move(s));
      } else {
        next();  // {%
        const Token& tag = peek();
        if (tag.kind != Tok::kName) fail(tag.pos, "expected a tag name, found " + describe(tag));
        for (const char* e : ends) {
          if (tag.text == e) {
            end = next().text;
            return body;
          }
        }
        DepthGuard g(*this, tag.pos);
        body.push_back(parse_tag());
      }
    }
  }

  StmtPtr stmt(StmtKind k, Pos p) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->pos = p;
    return s;
  }

  StmtPtr parse_tag() {
    const Token& tag = next();
    const std::string& n = tag.text;
    if (n == "if") return parse_if(tag.pos);
    if (n == "for") return parse_for(tag.pos);
    if (n == "set") return parse_set(tag.pos);
    if (n == "macro") return parse_macro(tag.pos);
    if (n == "call") return parse_call_block(tag.pos);
    if (n == "filter") return parse_filter_block(tag.pos);
    if (n == "generation") return parse_scope(tag.pos, "endgeneration");
    if (n == "break" || n == "continue") {
      expect(Tok::kBlockEnd, "'%}'");
      return stmt(n == "break" ? StmtKind::kBreak : StmtKind::kContinue, tag.pos);
    }
    static constexpr const char* kKnown[] = {"include",    "extends", "block", "import",    "from",  "with",
                                             "autoescape", "do",      "trans", "pluralize", "print", "raw"};
    for (const char* k : kKnown) {
      if (n == k) fail(tag.pos, "unsupported tag '" + n + "' (chat templates render without it)");
    }
    fail(tag.pos, "unknown tag '" + n + "'");
  }

  StmtPtr parse_if(Pos p) {
    auto s = stmt(StmtKind::kIf, p);
    while (true) {
      s->exprs.push_back(parse_tuple(true));
      expect(Tok::kBlockEnd, "'%}'");
      std::string end;
      s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
      if (end == "elif") continue;
      if (end == "else") {
        expect(Tok::kBlockEnd, "'%}'");
        s->bodies.push_back(parse_body({"endif"}, end));
      }
      expect(Tok::kBlockEnd, "'%}'");
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (peek().kind != Tok::kName) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(Pos p) {
    auto s = stmt(StmtKind::kFor, p);
    s->targets = parse_targets();
    if (!is_name("in")) fail(peek().pos, "expected 'in' in the for tag, found " + describe(peek()));
    next();
    s->exprs.push_back(parse_tuple(false));
    if (is_name("if")) {
      next();
      s->exprs.push_back(parse_expression(true));
    } else {
      s->exprs.push_back(nullptr);
    }
    if (is_name("recursive")) fail(peek().pos, "unsupported construct 'recursive' loop");
    expect(Tok::kBlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(parse_body({"else", "endfor"}, end));
    if (end == "else") {
      expect(Tok::kBlockEnd, "'%}'");
      s->bodies.push_back(parse_body({"endfor"}, end));
    } else {
      s->bodies.emplace_back();
    }
    expect(Tok::kBlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_set(Pos p) {
    auto s = stmt(StmtKind::kSet, p);
    if (peek(1).kind == Tok::kOp && peek(1).text == ".") {
      s->targets.push_back(expect_name());
      next();
      s->attr = expect_name();
    } else {
      s->targets = parse_targets();
    }
    if (is_op("=")) {
      next();
      s->exprs.push_back(parse_tuple(true));
      expect(Tok::kBlockEnd, "'%}'");
      return s;
    }
    if (s->targets.size() != 1) fail(p, "a block set takes one name");
    s->kind = StmtKind::kSetBlock;
    s->exprs.push_back(is_op("|") ? parse_filters(nullptr) : nullptr);
    expect(Tok::kBlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(parse_body({"endset"}, end));
    expect(Tok::kBlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_macro(Pos p) {
    auto s = stmt(StmtKind::kMacro, p);
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->targets.empty()) expect_op(",");
      if (is_op(")")) break;
      s->targets.push_back(expect_name());
      if (is_op("=")) {
        next();
        s->exprs.push_back(parse_expression(true));
      } else {
        s->exprs.push_back(nullptr);
      }
    }
    next();
    expect(Tok::kBlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(parse_body({"endmacro"}, end));
    expect(Tok::kBlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_call_block(Pos p) {
    auto s = stmt(StmtKind::kCallBlock, p);
    if (is_op("(")) fail(peek().pos, "unsupported construct: call block with caller parameters");
    s->exprs.push_back(parse_expression(true));
    if (s->exprs[0]->kind != ExprKind::kCall) fail(p, "expected a macro call after 'call'");
    expect(Tok::kBlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(parse_body({"endcall"}, end));
    expect(Tok::kBlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_filter_block(Pos p) {
    auto s = stmt(StmtKind::kFilterBlock, p);
    s->exprs.push_back(parse_filter_chain(nullptr));
    expect(Tok::kBlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(parse_body({"endfilter"}, end));
    expect(Tok::kBlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_scope(Pos p, const char* end_tag) {
    auto s = stmt(StmtKind::kScope, p);
    expect(Tok::kBlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(parse_body({end_tag}, end));
    expect(Tok::kBlockEnd, "'%}'");
    return s;
  }

  // ---- expressions ------------------------------------------------------------------------

  // a, b, c (a list) or a single expression; `with_condexpr` false in a for tag's iterable.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens = false) {
    const Pos p = peek().pos;
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!is_op(",")) break;
        next();
        comma = true;
      }
      if (is_op(")") || is_op("]") || is_op("}") || peek().kind == Tok::kVarEnd || peek().kind == Tok::kBlockEnd ||
          is_name("in") || is_name("if") || is_name("recursive")) {
        if (items.empty() && !explicit_parens) fail(peek().pos, "expected an expression, found " + describe(peek()));
        break;
      }
      items.push_back(parse_expression(with_condexpr));
    }
    if (items.size() == 1 && !comma) return std::move(items[0]);
    auto e = node(ExprKind::kTuple, p);
    e->kids = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this, peek().pos);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      auto c = node(ExprKind::kCond, next().pos);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (is_name("else")) {
        next();
        other = parse_condexpr();
      }
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind k, std::string op, Pos p, ExprPtr a, ExprPtr b) {
    auto e = node(k, p);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Pos p = next().pos;
      e = binary(ExprKind::kOr, "or", p, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Pos p = next().pos;
      e = binary(ExprKind::kAnd, "and", p, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, peek().pos);
      auto e = node(ExprKind::kUnary, next().pos);
      e->name = "not";
      e->kids.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      const Token& t = peek();
      if (t.kind == Tok::kOp &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
        op = t.text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && is_name("in", 1)) {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprKind::kCompare, t.pos);
        cmp->kids.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->kids.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  template <class Sub>
  ExprPtr left_assoc(std::initializer_list<const char*> ops, Sub sub) {
    ExprPtr e = (this->*sub)();
    while (true) {
      const char* hit = nullptr;
      for (const char* op : ops) {
        if (is_op(op)) hit = op;
      }
      if (!hit) return e;
      const Pos p = next().pos;
      e = binary(ExprKind::kBinary, hit, p, std::move(e), (this->*sub)());
    }
  }

  ExprPtr parse_math1() { return left_assoc({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return left_assoc({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return left_assoc({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return left_assoc({"**"}, &Parser::parse_unary_filtered); }
  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this, peek().pos);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(ExprKind::kUnary, peek().pos);
      e->name = next().text;
      e->kids.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr literal(Pos p, Value v) {
    auto e = node(ExprKind::kLiteral, p);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    const Pos p = t.pos;
    switch (t.kind) {
      case Tok::kName: {
        next();
        if (t.text == "true" || t.text == "True") return literal(p, true);
        if (t.text == "false" || t.text == "False") return literal(p, false);
        if (t.text == "none" || t.text == "None") return literal(p, Value::none());
        auto e = node(ExprKind::kName, p);
        e->name = t.text;
        return e;
      }
      case Tok::kString: {
        std::string s;
        while (peek().kind == Tok::kString) s += next().text;  // adjacent literals concatenate
        return literal(p, std::move(s));
      }
      case Tok::kInt:
        return literal(p, next().int_value);
      case Tok::kFloat:
        return literal(p, next().float_value);
      case Tok::kOp:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        [[fallthrough]];
      default:
        fail(p, "expected an expression, found " + describe(t));
    }
  }

  ExprPtr parse_list() {
    auto e = node(ExprKind::kList, next().pos);
    while (!is_op("]")) {
      if (!e->kids.empty()) expect_op(",");
      if (is_op("]")) break;
      e->kids.push_back(parse_expression(true));
    }
    next();
    return e;
  }

  ExprPtr parse_dict() {
    auto e = node(ExprKind::kDict, next().pos);
    while (!is_op("}")) {
      if (!e->kids.empty()) expect_op(",");
      if (is_op("}")) break;
      e->kids.push_back(parse_expression(true));
      expect_op(":");
      e->kids.push_back(parse_expression(true));
    }
    next();
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Pos p = next().pos;
        if (peek().kind == Tok::kInt) {
          auto g = node(ExprKind::kGetItem, p);
          g->kids.push_back(std::move(e));
          g->kids.push_back(literal(p, next().int_value));
          e = std::move(g);
          continue;
        }
        auto g = node(ExprKind::kGetAttr, p);
        g->name = expect_name();
        g->kids.push_back(std::move(e));
        e = std::move(g);
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Pos p = next().pos;  // [
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (!is_op(":") && !is_op("]")) parts[n] = parse_expression(true);
      if (is_op(":")) {
        if (++n > 2) fail(peek().pos, "too many ':' in a slice");
        slice = true;
        next();
        continue;
      }
      break;
    }
    expect_op("]");
    auto e = node(slice ? ExprKind::kSlice : ExprKind::kGetItem, p);
    e->kids.push_back(std::move(obj));
    if (!slice && !parts[0]) fail(p, "empty subscript '[]'");
    e->kids.push_back(std::move(parts[0]));
    if (slice) {
      e->kids.push_back(std::move(parts[1]));
      e->kids.push_back(std::move(parts[2]));
    }
    return e;
  }

  // (a, b, k=v): positional then keyword arguments into e->kids / e->keys.
  void parse_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(peek().pos, "unsupported construct: *args/**kwargs in a call");
      if (peek().kind == Tok::kName && is_op("=", 1)) {
        e.keys.push_back(next().text);
        next();
        e.kids.push_back(parse_expression(true));
      } else {
        if (!e.keys.empty()) fail(peek().pos, "a positional argument after a keyword argument");
        e.kids.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(ExprKind::kCall, peek().pos);
    e->kids.push_back(std::move(callee));
    parse_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filters(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // One `| name(args)`; `subject` null in a {% filter %} tag.
  ExprPtr parse_filters(ExprPtr subject) {
    const Pos p = next().pos;  // |
    auto e = node(ExprKind::kFilter, p);
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += "." + expect_name();
    }
    e->kids.push_back(std::move(subject));
    if (is_op("(")) parse_args(*e);
    return e;
  }

  // `{% filter a | b(x) %}`: a chain whose innermost subject is null.
  ExprPtr parse_filter_chain(ExprPtr subject) {
    const Pos p = peek().pos;
    auto e = node(ExprKind::kFilter, p);
    e->name = expect_name();
    e->kids.push_back(std::move(subject));
    if (is_op("(")) parse_args(*e);
    while (is_op("|")) e = parse_filters(std::move(e));
    return e;
  }

  ExprPtr parse_test(ExprPtr subject) {
    const Pos p = next().pos;  // is
    auto e = node(ExprKind::kTest, p);
    if (is_name("not")) {
      next();
      e->negated = true;
    }
    e->name = expect_name();
    e->kids.push_back(std::move(subject));
    const Token& t = peek();
    if (is_op("(")) {
      parse_args(*e);
    } else if ((t.kind == Tok::kName || t.kind == Tok::kString || t.kind == Tok::kInt || t.kind == Tok::kFloat ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(t.pos, "you cannot chain multiple tests with 'is'");
      e->kids.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  const std::vector<Token>& t_;
  const std::string& name_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Body jinja_parse(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).parse();
}

}  // namespace temper::text::jinja
