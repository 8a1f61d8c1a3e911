// Template: lex and parse once, interpret per render (see template.h).
#include "temper/text/jinja/template.h"

#include "temper/text/jinja/interpreter.h"
#include "temper/text/jinja/lexer.h"
#include "temper/text/jinja/parser.h"

namespace temper::text::jinja {

Template::Template(std::string_view source, std::string name)
    : name_(std::move(name)), body_(std::make_shared<const Body>(jinja_parse(jinja_lex(source, name_), name_))) {}

std::string Template::render(const Dict& globals, const Limits& limits) const {
  return interpret(*body_, name_, globals, limits);
}

}  // namespace temper::text::jinja
