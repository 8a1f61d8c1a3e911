// Jinja2 lexer with the settings transformers renders chat templates under: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, newlines normalised to \n; `{%-`/`-%}` (and the
// comment and variable forms) strip whitespace, `{%+`/`+%}` keep it; comments dropped; `{% raw %}`
// kept as text. Follows jinja2/lexer.py 3.1 (tokeniter's lstrip rule, the balanced-bracket rule for
// end delimiters). Leaves out: line statements, custom delimiters, non-ASCII identifiers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace temper::text::jinja {

struct Pos {
  int line = 1;
  int col = 1;
};

enum class Tok : uint8_t { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok kind;
  std::string text;  // text, name, operator, or the string literal's decoded value
  Pos pos;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws temper::Error ("<name>:line:col: ...") on an unterminated tag, string or comment.
std::vector<Token> jinja_lex(std::string_view source, const std::string& name);

}  // namespace temper::text::jinja
