// Tree-walking evaluation of a parsed template (ast.h) with Jinja2's scoping: a for loop's body is
// a fresh scope every iteration (its sets do not outlive it), if blocks share their parent's scope,
// a macro runs in its own scope over the template's top level as it stands at call time, and
// namespace() objects carry values out of loops. Leaves out: recursive loops, caller arguments.
#pragma once

#include <string>

#include "temper/text/jinja/ast.h"
#include "temper/text/jinja/template.h"

namespace temper::text::jinja {

std::string interpret(const Body& body, const std::string& name, const Dict& globals, const Limits& limits);

}  // namespace temper::text::jinja
