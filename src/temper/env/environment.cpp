// The environment factory, option checks, reply checks shared by the program environment, and the helpers the
// built-ins use to read an assistant message (its tool calls, parse errors, last number).
#include "temper/env/environment.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/env/calculator_env.h"
#include "temper/env/guessing_env.h"
#include "temper/env/program_environment.h"

namespace temper::env {

namespace {

using ojson = nlohmann::ordered_json;

std::string shorten(const std::string& s, size_t n = 120) {
  std::string out = s.substr(0, n);
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return s.size() > n ? out + "..." : out;
}

std::string type_name(const ojson& j) {
  return j.type_name();
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

}  // namespace

std::vector<std::string> environment_names() {
  return {"calculator", "guess"};
}

void EnvOptions::validate() const {
  std::string names;
  for (const std::string& n : environment_names()) names += (names.empty() ? "" : ", ") + n;
  TEMPER_CHECK(!kind.empty()) << "env.kind: expected \"program\" or a built-in (" << names << "), got nothing";
  const std::vector<std::string> builtins = environment_names();
  const bool builtin = std::find(builtins.begin(), builtins.end(), kind) != builtins.end();
  TEMPER_CHECK(kind == "program" || builtin)
      << "env.kind: expected \"program\" or a built-in (" << names << "), got '" << kind << "'";
  if (kind == "program") {
    TEMPER_CHECK(!program.empty() && !program[0].empty())
        << "env.program: must name a command, e.g. [\"python3\", \"my_env.py\"]";
  } else {
    TEMPER_CHECK(program.empty()) << "env.program: only for kind \"program\"; the built-in '" << kind
                                  << "' runs in process";
  }
  TEMPER_CHECK(workers >= 1 && workers <= 256) << "env.workers: must be in [1, 256], got " << workers;
  TEMPER_CHECK(timeout_s > 0 && std::isfinite(timeout_s)) << "env.timeout_s: must be > 0, got " << timeout_s;
  TEMPER_CHECK(start_timeout_s > 0 && std::isfinite(start_timeout_s))
      << "env.start_timeout_s: must be > 0, got " << start_timeout_s;
  for (const std::string& e : env) {
    TEMPER_CHECK(e.find('=') != std::string::npos && e.find('=') > 0)
        << "env.env: each entry must be \"KEY=value\", got '" << e << "'";
  }
  TEMPER_CHECK(params.is_object()) << "env.params: must be a table (a JSON object), got " << shorten(params.dump());
}

std::unique_ptr<Environment> make_environment(const EnvOptions& opt) {
  opt.validate();
  if (opt.kind == "program") return std::make_unique<ProgramEnvironment>(opt);
  if (opt.kind == "calculator")
    return std::make_unique<CalculatorEnvironment>(CalculatorOptions::from_params(opt.params));
  if (opt.kind == "guess") return std::make_unique<GuessingEnvironment>(GuessOptions::from_params(opt.params));
  TEMPER_FAIL() << "env.kind: no environment '" << opt.kind << "'";
}

void check_messages(const ojson& messages, const std::string& what) {
  TEMPER_CHECK(messages.is_array()) << what << " must be a list of {role, content} objects, got "
                                    << type_name(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    const std::string at = what + "[" + std::to_string(i) + "]";
    TEMPER_CHECK(m.is_object()) << at << " must be an object {role, content}, got " << shorten(m.dump());
    auto role = m.find("role");
    TEMPER_CHECK(role != m.end()) << at << " has no \"role\"";
    TEMPER_CHECK(role->is_string() && !role->get<std::string>().empty())
        << at << ".role must be a non-empty string, got " << shorten(role->dump());
    auto content = m.find("content");
    TEMPER_CHECK(content != m.end()) << at << " has no \"content\"";
    TEMPER_CHECK(content->is_string()) << at << ".content must be a string, got " << shorten(content->dump());
  }
}

void check_tools(const ojson& tools, const std::string& what) {
  if (tools.is_null()) return;
  TEMPER_CHECK(tools.is_array()) << what << " must be a list of tool schemas or null, got " << type_name(tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string at = what + "[" + std::to_string(i) + "]";
    TEMPER_CHECK(t.is_object()) << at << " must be an object {\"type\": \"function\", \"function\": {...}}, got "
                                << shorten(t.dump());
    auto type = t.find("type");
    TEMPER_CHECK(type != t.end() && type->is_string() && type->get<std::string>() == "function")
        << at << ".type must be \"function\"";
    auto fn = t.find("function");
    TEMPER_CHECK(fn != t.end() && fn->is_object()) << at << ".function must be an object {name, parameters, ...}";
    auto name = fn->find("name");
    TEMPER_CHECK(name != fn->end() && name->is_string() && !name->get<std::string>().empty())
        << at << ".function.name must be a non-empty string";
    if (auto p = fn->find("parameters"); p != fn->end()) {
      TEMPER_CHECK(p->is_object()) << at << ".function.parameters must be an object (a JSON schema)";
    }
  }
}

std::string message_text(const ojson& message) {
  if (!message.is_object()) return {};
  auto c = message.find("content");
  if (c == message.end() || c->is_null()) return {};
  if (c->is_string()) return c->get<std::string>();
  if (c->is_array()) {  // content parts: the text ones
    std::string out;
    for (const ojson& part : *c)
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string())
        out += part["text"].get<std::string>();
    return out;
  }
  return c->dump();
}

std::vector<ToolCall> message_tool_calls(const ojson& message) {
  std::vector<ToolCall> out;
  if (!message.is_object()) return out;
  auto calls = message.find("tool_calls");
  if (calls == message.end() || !calls->is_array()) return out;
  for (const ojson& c : *calls) {
    if (!c.is_object()) continue;
    ToolCall tc;
    if (auto id = c.find("id"); id != c.end() && id->is_string()) tc.id = id->get<std::string>();
    const ojson* fn = &c;  // OpenAI: {id, type, function: {name, arguments}}; also a flat {name, arguments}
    if (auto f = c.find("function"); f != c.end() && f->is_object()) fn = &*f;
    if (auto n = fn->find("name"); n != fn->end() && n->is_string()) tc.name = n->get<std::string>();
    auto args = fn->find("arguments");
    if (args == fn->end() || args->is_null()) {
      tc.arguments = ojson::object();
    } else if (args->is_object()) {
      tc.arguments = *args;
    } else if (args->is_string()) {
      try {
        ojson parsed = ojson::parse(args->get<std::string>());
        if (parsed.is_object())
          tc.arguments = std::move(parsed);
        else
          tc.arguments_error = "the arguments are not a JSON object: " + shorten(args->get<std::string>());
      } catch (const ojson::exception&) {  // parse_error, and out_of_range for a number beyond double (1e999)
        tc.arguments_error = "the arguments are not JSON: " + shorten(args->get<std::string>());
      }
    } else {
      tc.arguments_error = "the arguments are not a JSON object: " + shorten(args->dump());
    }
    out.push_back(std::move(tc));
  }
  return out;
}

std::vector<std::string> message_parse_errors(const ojson& message) {
  std::vector<std::string> out;
  if (!message.is_object()) return out;
  auto e = message.find("parse_errors");
  if (e == message.end() || e->is_null()) return out;
  if (!e->is_array()) return {e->is_string() ? e->get<std::string>() : e->dump()};
  for (const ojson& x : *e) {
    if (x.is_string())
      out.push_back(x.get<std::string>());
    else if (x.is_object() && x.contains("error") && x["error"].is_string())
      out.push_back(x["error"].get<std::string>());
    else
      out.push_back(x.dump());
  }
  return out;
}

std::optional<std::string> last_number(std::string_view s) {
  std::optional<std::string> last;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    size_t j = i;
    bool neg = false;
    if (s[j] == '-' && j + 1 < n && is_digit(s[j + 1]) && (j == 0 || !is_word(s[j - 1]))) neg = true, ++j;
    if (!is_digit(s[j])) {
      ++i;
      continue;
    }
    std::string ip;
    while (j < n && is_digit(s[j])) ip += s[j++];
    // ",ddd" groups not followed by another digit
    while (j + 3 < n && s[j] == ',' && is_digit(s[j + 1]) && is_digit(s[j + 2]) && is_digit(s[j + 3]) &&
           (j + 4 >= n || !is_digit(s[j + 4]))) {
      ip.append(s.substr(j + 1, 3));
      j += 4;
    }
    std::string frac;
    if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
      ++j;
      while (j < n && is_digit(s[j])) frac += s[j++];
    }
    const size_t nz = ip.find_first_not_of('0');
    ip = nz == std::string::npos ? "0" : ip.substr(nz);
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    std::string v = ip + (frac.empty() ? "" : "." + frac);
    if (neg && v != "0") v = "-" + v;
    last = v;
    i = j;
  }
  return last;
}

RowDraw row_draw(const ojson& row, const std::optional<uint64_t>& seed_param, const char* env) {
  TEMPER_CHECK(row.is_object()) << "env '" << env << "': the row must be an object, got " << shorten(row.dump());
  RowDraw d;
  if (auto s = row.find("split"); s != row.end() && !s->is_null()) {
    TEMPER_CHECK(s->is_string() && (*s == "train" || *s == "eval"))
        << "env '" << env << "': row.split must be \"train\" or \"eval\", got " << shorten(s->dump());
    d.eval = *s == "eval";
  }
  if (auto i = row.find("index"); i != row.end() && !i->is_null()) {
    TEMPER_CHECK(i->is_number_integer() && i->get<int64_t>() >= 0)
        << "env '" << env << "': row.index must be an integer >= 0, got " << shorten(i->dump());
    d.index = i->get<uint64_t>();
  }
  if (seed_param) {
    d.seed = *seed_param;
  } else if (auto s = row.find("seed"); s != row.end() && !s->is_null()) {
    TEMPER_CHECK(s->is_number_integer()) << "env '" << env << "': row.seed must be an integer, got "
                                         << shorten(s->dump());
    d.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }
  return d;
}

}  // namespace temper::env
