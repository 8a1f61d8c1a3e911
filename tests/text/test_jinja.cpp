// The Jinja interpreter against Jinja2 3.1.6 as transformers 4.51.3 configures it (golden:
// tests/data/chat_templates/renders.json, tools/ref/make_chat_template_goldens.py): snippets of
// every construct byte for byte, real model templates (llama.cpp's copies in .cache/llamacpp,
// fetched by scripts/bootstrap) over conversations with system turns, tools, tool calls and
// results, thinking, add_generation_prompt both ways, a pinned date; the renders transformers
// refuses are refused too. Then the errors: unsupported constructs, raise_exception, the bounds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/test_data.h"
#include "temper/core/error.h"
#include "temper/text/chat_template.h"
#include "temper/text/jinja/json.h"
#include "temper/text/jinja/template.h"

using namespace temper;
using namespace temper::text;
using nlohmann::ordered_json;

namespace {

const ordered_json& golden() {
  static const ordered_json g = [] {
    std::ifstream f(test::test_data("chat_templates/renders.json"), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ordered_json::parse(ss.str());
  }();
  return g;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string& cache_dir() {
  static const std::string d = test::test_data("../../.cache/llamacpp/templates");
  return d;
}

#define SKIP_WITHOUT_TEMPLATES()             \
  if (!std::filesystem::exists(cache_dir())) \
  GTEST_SKIP() << cache_dir() << " is absent (scripts/bootstrap extracts llama.cpp's templates there)"

// The template's source: tokenizer_config.json's chat_template, or the cache's .jinja file.
std::string template_source(const ordered_json& entry) {
  const std::string path = entry["path"].get<std::string>();
  const std::string text = read_file(test::test_data("../../" + path));
  if (path.ends_with(".json")) return ordered_json::parse(text)["chat_template"].get<std::string>();
  return text;
}

std::tm pinned_now() {
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 12;
  t.tm_wday = 5;
  t.tm_yday = 207;
  return t;
}

std::string str_or_empty(const ordered_json& j) {
  return j.is_string() ? j.get<std::string>() : "";
}

// Renders every golden row of the templates `main` selects; returns how many were checked.
int check_renders(bool main) {
  const ordered_json& g = golden();
  std::map<std::string, std::unique_ptr<ChatTemplate>> templates;
  int n = 0;
  for (const auto& r : g["renders"]) {
    const std::string name = r["template"].get<std::string>();
    const ordered_json& entry = g["templates"][name];
    if (entry["main"].get<bool>() != main) continue;
    auto& t = templates[name];
    if (!t) {
      const std::string src = template_source(entry);
      EXPECT_FALSE(src.empty()) << entry["path"];
      t = std::make_unique<ChatTemplate>(
          src, ChatTokens{str_or_empty(entry["bos_token"]), str_or_empty(entry["eos_token"]), "", ""}, name);
    }
    ChatRenderOptions o;
    o.add_generation_prompt = r["add_generation_prompt"].get<bool>();
    const std::string conv = r["conversation"].get<std::string>();
    if (r["tools"].get<bool>()) o.tools = g["tools"][conv];
    o.kwargs = r["kwargs"];
    o.now = pinned_now();
    const std::string what =
        name + " / " + conv + " / gen=" + (o.add_generation_prompt ? "1" : "0") + " / kwargs=" + r["kwargs"].dump();
    if (r.contains("text")) {
      try {
        EXPECT_EQ(t->render(g["conversations"][conv], o), r["text"].get<std::string>()) << what;
      } catch (const Error& e) {
        ADD_FAILURE() << what << ": " << e.what();
      }
    } else {
      const std::string want = r["error"].get<std::string>();
      try {
        const std::string got = t->render(g["conversations"][conv], o);
        ADD_FAILURE() << what << ": rendered, transformers refuses (" << want << "):\n" << got;
      } catch (const Error& e) {
        if (want.starts_with("TemplateError: ")) {  // raise_exception: the template's own message
          EXPECT_NE(std::string(e.what()).find(want.substr(15)), std::string::npos) << what << ": " << e.what();
        }
      }
    }
    ++n;
  }
  return n;
}

TEST(Jinja, SnippetsEqualJinja2) {
  int n = 0;
  for (const auto& s : golden()["snippets"]) {
    const std::string src = s["template"].get<std::string>();
    jinja::Dict vars;
    for (auto it = s["vars"].begin(); it != s["vars"].end(); ++it) vars.set(it.key(), jinja::from_json(it.value()));
    vars.set("strftime_now", jinja::Value::callable("strftime_now", [](jinja::CallArgs& a) {
               std::tm t = pinned_now();
               char buf[128];
               return jinja::Value(std::string(buf, std::strftime(buf, sizeof buf, a.args[0].as_string().c_str(), &t)));
             }));
    try {
      const std::string got = jinja::Template(src, "snippet").render(vars);
      if (s.contains("text")) {
        EXPECT_EQ(got, s["text"].get<std::string>()) << src;
      } else {
        ADD_FAILURE() << src << ": rendered '" << got << "', Jinja2 refuses: " << s["error"];
      }
    } catch (const Error& e) {
      EXPECT_TRUE(s.contains("error")) << src << ": " << e.what();
    }
    ++n;
  }
  EXPECT_EQ(n, 57);
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    jinja::Template("line one\n{{ 'x' }}{{ raise_exception('custom failure: ' ~ 42) }}", "t").render({});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("custom failure: 42"), std::string::npos) << m;
    EXPECT_NE(m.find("t:2:"), std::string::npos) << m;
  }
}

TEST(ChatTemplateGolden, MainTemplatesRenderEqualTransformers) {
  SKIP_WITHOUT_TEMPLATES();
  EXPECT_EQ(check_renders(true), 396);
}

TEST(ChatTemplateGolden, EveryOtherCachedTemplateRendersEqualTransformers) {
  SKIP_WITHOUT_TEMPLATES();
  EXPECT_EQ(check_renders(false), 183);
}

void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Jinja, UnsupportedConstructsNameThemselvesAndTheirLine) {
  expect_error([] { jinja::Template("ok\n  {% include 'x.j2' %}", "t"); }, {"t:2:6", "unsupported tag 'include'"});
  expect_error([] { jinja::Template("{% extends 'base' %}", "t"); }, {"t:1:4", "'extends'"});
  expect_error([] { jinja::Template("{% for x in y recursive %}{% endfor %}", "t"); }, {"t:1:15", "recursive"});
  expect_error([] { jinja::Template("{{ f(*args) }}", "t"); }, {"t:1:6", "*args"});
  expect_error([] { jinja::Template("{% if x %}never closed", "t"); }, {"missing 'endif'"});
  expect_error([] { jinja::Template("{{ 'unterminated }}", "t"); }, {"t:1:4", "unterminated string"});
  expect_error([] { jinja::Template("a\n{{ x | nosuchfilter }}", "t").render({}); }, {"t:2:6", "nosuchfilter"});
  expect_error([] { jinja::Template("{{ x is nosuchtest }}", "t").render({}); }, {"t:1:6", "nosuchtest"});
  expect_error([] { jinja::Template("{{ 'a'.nosuchmethod() }}", "t").render({}); }, {"nosuchmethod"});
  expect_error([] { jinja::Template("{% set l = [] %}{{ l.append(1) }}", "t").render({}); },
               {"list.append", "immutable sandbox"});
  expect_error([] { jinja::Template("{{ x.y }}", "t").render({}); }, {"t:1:5", "'x' is undefined"});
}

TEST(Jinja, HostileArithmeticIsBoundedOrAnError) {
  auto render = [](const std::string& src) { return jinja::Template(src, "t").render({}); };
  EXPECT_EQ(render("{{ 1 ** 1000000000000000000 }}|{{ (-1) ** 999999999999 }}|{{ 3 ** 39 }}"),
            "1|-1|4052555153018976267");  // by squaring, not 10^18 multiplications
  expect_error([&] { render("{{ 3 ** 40 }}"); }, {"integer overflow"});
  expect_error([&] { render("{{ (-9223372036854775807 - 1) // -1 }}"); }, {"integer overflow"});
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
  expect_error([&] { render("{{ 'ab' * 4611686018427387904 }}"); }, {"repetition result too large"});
  expect_error([&] { render("{{ [1, 2] * 4611686018427387904 }}"); }, {"repetition result too large"});
  expect_error([&] { render("{{ 'ab' | center(1000000000) }}"); }, {"center(): width 1000000000 is too large"});
  expect_error([&] { render("{{ 'a' | indent(1000000000) }}"); }, {"indent(): width"});
  expect_error([&] { render("{{ {} | tojson(indent=1000000000) }}"); }, {"tojson(): width"});
  expect_error([&] { render("{{ ('a' * 100000).replace('', 'b' * 1000) }}"); }, {"exceed 16 MiB"});
  expect_error([&] { render("{{ 1e300 | int }}"); }, {"integer overflow converting 1e+300"});
  expect_error([&] { render("{{ [9223372036854775807, 1] | sum }}"); }, {"integer overflow in sum()"});
  expect_error([&] { render("{{ range(0, 1000000000) }}"); }, {"range too big"});
  expect_error([&] { render("{{ 'a,b'.split('') }}"); }, {"str.split(): empty separator"});
  expect_error([&] { render("{{ 'a,b'.rsplit('', 1) }}"); }, {"str.rsplit(): empty separator"});
}

TEST(Jinja, BoundsAreErrors) {
  jinja::Limits lim;
  lim.max_iterations = 1000;
  expect_error(
      [&] {
        jinja::Template("{% for i in range(40) %}{% for j in range(40) %}{% endfor %}{% endfor %}", "t")
            .render({}, lim);
      },
      {"more than 1000 loop iterations"});
  EXPECT_NO_THROW(jinja::Template("{% for i in range(1000) %}{% endfor %}", "t").render({}, lim));
  lim.max_output_bytes = 100;
  expect_error([&] { jinja::Template("{% for i in range(200) %}x{% endfor %}", "t").render({}, lim); },
               {"output exceeds 100 bytes"});
  expect_error([] { jinja::Template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "t").render({}); },
               {"nested deeper than 64"});
  expect_error([] { jinja::Template("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}", "t"); },
               {"nesting deeper than"});
  // Strings built without being written are held to the output bound, lists to the loop bound.
  lim = {};
  lim.max_output_bytes = 1000;
  expect_error(
      [&] {
        jinja::Template(
            "{% set ns = namespace(s='ab') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "t")
            .render({}, lim);
      },
      {"a string of 1024 bytes exceeds the render limit of 1000"});
  expect_error([&] { jinja::Template("{{ ('x' * 2000) | length }}", "t").render({}, lim); }, {"2000 bytes"});
  lim.max_iterations = 100;
  expect_error([&] { jinja::Template("{{ [0] * 101 }}", "t").render({}, lim); }, {"a list of 101 items"});
  expect_error([] { jinja::Template("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "t").render({}); },
               {"a namespace() can only be a variable"});
  expect_error([] { jinja::Template("{% set ns = namespace() %}{{ [ns] }}", "t").render({}); },
               {"a namespace() can only be a variable"});
  // Containers nest at most 256 deep: freeing, comparing and printing them recurse.
  expect_error(
      [] {
        jinja::Template("{% set ns = namespace(x=0) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}{% endfor %}",
                        "t")
            .render({});
      },
      {"t:1:", "nested deeper than 256"});
  // The default bound: a million iterations.
  expect_error(
      [] {
        jinja::Template("{% for i in range(100000) %}{% for j in range(11) %}{% endfor %}{% endfor %}", "t").render({});
      },
      {"more than 1000000 loop iterations"});
}

}  // namespace
