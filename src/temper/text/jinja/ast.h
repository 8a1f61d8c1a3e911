// The syntax tree the parser builds and the interpreter walks: one node type for expressions and
// one for statements, with the operands in `kids`/`bodies` (see each kind's comment for the layout).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/text/jinja/lexer.h"
#include "temper/text/jinja/value.h"

namespace temper::text::jinja {

enum class ExprKind : uint8_t {
  kLiteral,  // value
  kName,     // name
  kList,     // kids: items
  kTuple,    // kids: items (evaluates to a list)
  kDict,     // kids: key, value, key, value...
  kUnary,    // name: "not" | "-" | "+"; kids[0]
  kBinary,   // name: + - * / // % ** ~; kids[0], kids[1]
  kAnd,      // kids[0], kids[1]
  kOr,       // kids[0], kids[1]
  kCompare,  // kids[0] ops[0] kids[1] ops[1] kids[2]... (chained); ops: == != < > <= >= in notin
  kCond,     // kids: then, condition, else (else may be null)
  kGetAttr,  // kids[0] . name
  kGetItem,  // kids[0] [ kids[1] ]
  kSlice,    // kids[0] [ kids[1] : kids[2] : kids[3] ] (null where omitted)
  kCall,     // kids[0](args, then kwargs named by `keys`)
  kFilter,   // kids[0] | name(args, kwargs); kids[0] is null inside {% filter %}
  kTest,     // kids[0] is [not] name(args, kwargs)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  Pos pos;
  std::string name;
  Value value;
  std::vector<ExprPtr> kids;
  std::vector<std::string> keys;  // kCall/kFilter/kTest: names of the last keys.size() kids
  std::vector<std::string> ops;   // kCompare
  bool negated = false;           // kTest: `is not`
};

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ exprs[0] }}
  kIf,           // exprs: one condition per branch; bodies: one per branch, then the else body if any
  kFor,          // targets: loop variables; exprs: iterable, filter (may be null); bodies: body, else
  kSet,          // targets: names (several: unpack); attr: namespace attribute (targets[0].attr); exprs[0]
  kSetBlock,     // targets[0] (attr as kSet); bodies[0] rendered; exprs[0]: optional filter on it
  kMacro,        // name; targets: parameters; exprs: defaults (null where none); bodies[0]
  kCallBlock,    // exprs[0]: the call; bodies[0]: what caller() renders
  kFilterBlock,  // exprs[0]: a kFilter whose subject is the rendered bodies[0]
  kScope,        // bodies[0] rendered in place ({% generation %})
  kBreak,
  kContinue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;  // kText; kMacro: name
  std::string attr;  // kSet/kSetBlock on `ns.attr`
  std::vector<std::string> targets;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

}  // namespace temper::text::jinja
