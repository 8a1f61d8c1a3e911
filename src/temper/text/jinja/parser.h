// Jinja2 parser: tokens to the statement and expression tree (ast.h), with jinja2/parser.py's
// precedence (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary, filters
// and tests binding to a unary's operand). A tag outside the chat-template subset (include,
// extends, block, import, with, autoescape, do...) is a temper::Error naming it and its line:col.
#pragma once

#include <string>
#include <vector>

#include "temper/text/jinja/ast.h"

namespace temper::text::jinja {

Body jinja_parse(const std::vector<Token>& tokens, const std::string& name);

}  // namespace temper::text::jinja
