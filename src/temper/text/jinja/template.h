// A Jinja2 template as transformers renders chat templates: parsed once (lexer.h, parser.h),
// rendered many times over a dict of globals (interpreter.h) with the bounds below. Errors are
// temper::Error naming the template, the line:col and the construct; raise_exception's message
// comes through verbatim.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "temper/text/jinja/ast.h"
#include "temper/text/jinja/value.h"

namespace temper::text::jinja {

struct Limits {
  int64_t max_iterations = 1'000'000;   // loop iterations over the whole render
  size_t max_output_bytes = 16u << 20;  // 16 MiB: the render, and any captured block
  int max_depth = 64;                   // nested macro calls
};

class Template {
 public:
  // `name` prefixes error messages ("<name>:line:col: ...").
  Template(std::string_view source, std::string name);

  // globals: the template's variables; builtins (range, namespace, dict, raise_exception) are
  // added under them.
  std::string render(const Dict& globals, const Limits& limits = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace temper::text::jinja
