// Tool calls in the model's own syntax (hermes, llama3_json, mistral): parses of well-formed and
// malformed turns with their exact error texts, the assistant message; then, over real templates
// (llama.cpp's copies in .cache, skipped when absent) and transformers' renders
// (tests/data/tool_calls/goldens.json, tools/ref/make_tool_call_goldens.py): parse -> message ->
// render equals transformers, the generated text is the training render of the turn, and the
// continuation after the turn is what the full render appends.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "common/test_data.h"
#include "temper/core/error.h"
#include "temper/text/chat_delta.h"
#include "temper/text/tool_calls.h"

using namespace temper;
using namespace temper::text;
using nlohmann::ordered_json;

namespace {

ParsedTurn parse(std::string_view text, ToolCallFormat f) {
  return parse_tool_calls(text, f);
}

std::vector<std::string> errors_of(std::string_view text, ToolCallFormat f) {
  return parse_tool_calls(text, f).errors;
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

std::tm pinned_now() {  // 2024-07-26 12:00, as the golden script pins strftime_now
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 12;
  t.tm_wday = 5;
  t.tm_yday = 207;
  return t;
}

// ---- formats -------------------------------------------------------------------------------------

TEST(ToolCallFormat, NamesResolveAndUnknownIsAnError) {
  EXPECT_EQ(tool_call_format_resolve("hermes"), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format_resolve("llama3_json"), ToolCallFormat::llama3_json);
  EXPECT_EQ(tool_call_format_resolve("mistral"), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_resolve("none", "<tool_call>{\"name\""), ToolCallFormat::none);
  EXPECT_EQ(tool_call_format_resolve("auto", "{{ '[TOOL_CALLS]' }}"), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_resolve("", "{{ '<tool_call>\\n{\"name\": \"' }}"), ToolCallFormat::hermes);
  for (ToolCallFormat f :
       {ToolCallFormat::none, ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::mistral}) {
    EXPECT_EQ(tool_call_format_resolve(tool_call_format_name(f)), f);
  }
  try {
    tool_call_format_resolve("qwen");
    ADD_FAILURE() << "an unknown format name must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown tool-call format 'qwen'; known: hermes, llama3_json, mistral, none, "
                                         "auto"),
              std::string::npos)
        << e.what();
  }
}

TEST(ToolCallFormat, DetectedFromTheCachedTemplates) {
  SKIP_WITHOUT_TEMPLATES();
  const std::map<std::string, ToolCallFormat> want = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::hermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::hermes},
      {"Qwen-QwQ-32B.jinja", ToolCallFormat::hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::hermes},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::hermes},
      {"ibm-granite-granite-4.0.jinja", ToolCallFormat::hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::llama3_json},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::llama3_json},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolCallFormat::llama3_json},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::mistral},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::mistral},
      {"unsloth-mistral-Devstral-Small-2507.jinja", ToolCallFormat::mistral},
      // Other syntaxes are none: XML-ish <function=...> / <arg_key>, Cohere's actions, functionary, Apriel.
      {"Qwen3-Coder.jinja", ToolCallFormat::none},
      {"GLM-4.6.jinja", ToolCallFormat::none},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolCallFormat::none},
      {"meetkai-functionary-medium-v3.1.jinja", ToolCallFormat::none},
      {"google-gemma-2-2b-it.jinja", ToolCallFormat::none},
      {"unsloth-Apriel-1.5.jinja", ToolCallFormat::none},  // <tool_calls>[{...}, ...]</tool_calls>
      {"MiniMax-M3.jinja", ToolCallFormat::none},
  };
  for (const auto& [file, f] : want) {
    const std::string src = read_file(cache_dir() + "/" + file);
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(tool_call_format_name(detect_tool_call_format(src)), tool_call_format_name(f)) << file;
  }
}

// ---- hermes --------------------------------------------------------------------------------------

TEST(ToolCallsHermes, CallsContentAndIds) {
  const ParsedTurn t = parse(
      "Checking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"Europe/Rome\\\"}\"}\n"
      "</tool_call>\n",
      ToolCallFormat::hermes);
  EXPECT_EQ(t.content, "Checking both.");
  EXPECT_TRUE(t.errors.empty()) << t.errors[0];
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].id, "call_1");
  EXPECT_EQ(t.calls[0].name, "get_weather");
  EXPECT_EQ(t.calls[0].arguments.dump(), R"({"city":"Rome","days":2})");  // order kept
  EXPECT_EQ(t.calls[1].id, "call_2");
  EXPECT_EQ(t.calls[1].name, "get_time");
  EXPECT_EQ(t.calls[1].arguments.dump(), R"({"tz":"Europe/Rome"})");  // decoded from the string

  // Text on both sides of a call, whitespace touching the call dropped; a turn without calls verbatim.
  EXPECT_EQ(
      parse("A \n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n B", ToolCallFormat::hermes).content,
      "A\nB");
  EXPECT_EQ(parse("  plain answer\n", ToolCallFormat::hermes).content, "  plain answer\n");
  EXPECT_EQ(parse("  plain answer\n", ToolCallFormat::hermes).calls.size(), 0u);
  // none: everything is content.
  EXPECT_EQ(parse("<tool_call>{}</tool_call>", ToolCallFormat::none).content, "<tool_call>{}</tool_call>");
}

TEST(ToolCallsHermes, MalformedCallsAreErrorLinesNotExceptions) {
  using V = std::vector<std::string>;
  EXPECT_EQ(
      errors_of("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1,}}\n</tool_call>", ToolCallFormat::hermes),
      V{"tool call 1: invalid JSON at byte 35: syntax error while parsing object key - unexpected '}'; "
        "expected string literal"});
  EXPECT_EQ(errors_of("<tool_call>{\"arguments\": {}}</tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: missing \"name\""});
  EXPECT_EQ(errors_of("<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: \"name\" must be a string, got number"});
  EXPECT_EQ(errors_of("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: \"arguments\" must be an object, got array"});
  EXPECT_EQ(errors_of("<tool_call>{\"name\": \"f\", \"arguments\": \"[1]\"}</tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: \"arguments\" is a string holding array, expected an object"});
  EXPECT_EQ(errors_of("<tool_call>{\"name\": \"f\"}</tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: missing \"arguments\" (an object; {} when there are none)"});
  EXPECT_EQ(errors_of("<tool_call>[{\"name\": \"f\"}]</tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: expected a JSON object {\"name\": ..., \"arguments\": {...}}, got array"});
  EXPECT_EQ(errors_of("<tool_call></tool_call>", ToolCallFormat::hermes),
            V{"tool call 1: invalid JSON at byte 0: syntax error while parsing value - unexpected end of input; "
              "expected '[', '{', or a literal"});

  // A good call, then an unclosed one: the good one kept (id by position), the other an error.
  const ParsedTurn t =
      parse("Hi\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\"",
            ToolCallFormat::hermes);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "a");
  EXPECT_EQ(t.content, "Hi");
  EXPECT_EQ(t.errors, V{"tool call 2: unclosed <tool_call> at byte 57: no </tool_call> follows it"});
  // A bad first call does not renumber the second.
  const ParsedTurn u = parse("<tool_call>{oops}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
                             ToolCallFormat::hermes);
  ASSERT_EQ(u.calls.size(), 1u);
  EXPECT_EQ(u.calls[0].id, "call_2");
  ASSERT_EQ(u.errors.size(), 1u);
  EXPECT_TRUE(u.errors[0].starts_with("tool call 1: invalid JSON at byte 1: ")) << u.errors[0];
}

// ---- llama3_json ---------------------------------------------------------------------------------

TEST(ToolCallsLlama3Json, CallsPythonTagAndContent) {
  const ParsedTurn a =
      parse("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", ToolCallFormat::llama3_json);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].id, "call_1");
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments.dump(), R"({"city":"Paris"})");
  EXPECT_EQ(a.content, "");

  const ParsedTurn b =
      parse("<|python_tag|>{\"name\": \"f\", \"arguments\": {\"x\": 1}}; {\"name\": \"g\", \"parameters\": {}}",
            ToolCallFormat::llama3_json);
  ASSERT_EQ(b.calls.size(), 2u);
  EXPECT_EQ(b.calls[0].name, "f");
  EXPECT_EQ(b.calls[0].arguments.dump(), R"({"x":1})");
  EXPECT_EQ(b.calls[1].name, "g");
  EXPECT_EQ(b.calls[1].id, "call_2");
  EXPECT_TRUE(b.errors.empty());

  // Text, and JSON that is no call, are content as written.
  EXPECT_EQ(parse("It is sunny.", ToolCallFormat::llama3_json).content, "It is sunny.");
  const ParsedTurn c = parse("{\"answer\": 42}", ToolCallFormat::llama3_json);
  EXPECT_EQ(c.content, "{\"answer\": 42}");
  EXPECT_TRUE(c.calls.empty() && c.errors.empty());
  EXPECT_EQ(parse("{not json at all", ToolCallFormat::llama3_json).content, "{not json at all");
}

TEST(ToolCallsLlama3Json, MalformedCalls) {
  using V = std::vector<std::string>;
  EXPECT_EQ(errors_of("{\"name\": \"f\", \"parameters\": {\"city\": Paris}}", ToolCallFormat::llama3_json),
            V{"tool call 1: invalid JSON at byte 37: syntax error while parsing value - invalid literal; last read: "
              "'\"city\": P'"});
  EXPECT_EQ(errors_of("{\"name\": \"f\", \"parameters\": {\"a\": 1}", ToolCallFormat::llama3_json),
            V{"tool call 1: invalid JSON at byte 36: syntax error while parsing object - unexpected end of input; "
              "expected '}'"});
  EXPECT_EQ(errors_of("{\"parameters\": {}}", ToolCallFormat::llama3_json), V{"tool call 1: missing \"name\""});
  EXPECT_EQ(errors_of("{\"name\": \"f\"}", ToolCallFormat::llama3_json),
            V{"tool call 1: missing \"parameters\" (an object; {} when there are none)"});
  EXPECT_EQ(errors_of("<|python_tag|>brave_search.call(query=\"x\")", ToolCallFormat::llama3_json),
            V{"tool call 1: expected a JSON object {\"name\": ..., \"parameters\": {...}} after <|python_tag|>"});
  EXPECT_EQ(errors_of("{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": 1}",
                      ToolCallFormat::llama3_json),
            V{"tool call 2: \"parameters\" must be an object, got number"});
}

// ---- mistral -------------------------------------------------------------------------------------

TEST(ToolCallsMistral, ListFormNameArgsFormAndIds) {
  const ParsedTurn a = parse(
      "Sure.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123def\"}, "
      "{\"name\": \"get_time\", \"arguments\": {}}]",
      ToolCallFormat::mistral);
  EXPECT_TRUE(a.errors.empty());
  EXPECT_EQ(a.content, "Sure.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].id, "abc123def");
  EXPECT_EQ(a.calls[0].arguments.dump(), R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].name, "get_time");
  EXPECT_EQ(a.calls[1].id, "call00002");  // 9 alphanumerics, as Mistral's templates require

  const ParsedTurn b = parse(
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[CALL_ID]xyz987uvw[ARGS]{\"tz\": \"UTC\"}",
      ToolCallFormat::mistral);
  EXPECT_TRUE(b.errors.empty()) << b.errors[0];
  ASSERT_EQ(b.calls.size(), 2u);
  EXPECT_EQ(b.calls[0].name, "get_weather");
  EXPECT_EQ(b.calls[0].id, "call00001");
  EXPECT_EQ(b.calls[1].name, "get_time");
  EXPECT_EQ(b.calls[1].id, "xyz987uvw");
  EXPECT_EQ(b.calls[1].arguments.dump(), R"({"tz":"UTC"})");
  EXPECT_EQ(b.content, "");

  EXPECT_EQ(parse("No tools needed.", ToolCallFormat::mistral).content, "No tools needed.");
}

TEST(ToolCallsMistral, MalformedCalls) {
  using V = std::vector<std::string>;
  EXPECT_EQ(errors_of("[TOOL_CALLS]get_weather{\"city\": \"Paris\"}", ToolCallFormat::mistral),
            V{"tool call 1: expected name[ARGS]{...} or a JSON list after [TOOL_CALLS], found no [ARGS]"});
  EXPECT_EQ(errors_of("[TOOL_CALLS][ARGS]{}", ToolCallFormat::mistral),
            V{"tool call 1: missing the name between [TOOL_CALLS] and [ARGS]"});
  EXPECT_EQ(errors_of("[TOOL_CALLS]f[ARGS]\"x\"", ToolCallFormat::mistral),
            V{"tool call 1: expected a JSON object after [ARGS]"});
  EXPECT_EQ(errors_of("[TOOL_CALLS]f[ARGS]{\"a\": }", ToolCallFormat::mistral),
            V{"tool call 1: invalid JSON at byte 6: syntax error while parsing value - unexpected '}'; expected '[', "
              "'{', or a literal"});
  EXPECT_EQ(
      errors_of("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"arguments\": {}}]", ToolCallFormat::mistral),
      V{"tool call 2: missing \"name\""});
  EXPECT_EQ(errors_of("[TOOL_CALLS][]", ToolCallFormat::mistral),
            V{"tool call 1: [TOOL_CALLS] is followed by an empty list"});
}

// ---- assistant message ---------------------------------------------------------------------------

TEST(ToolCalls, AssistantMessage) {
  const std::string text =
      "On it.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"b\": 1, \"a\": [2]}}\n</tool_call>";
  EXPECT_EQ(assistant_message(parse(text, ToolCallFormat::hermes), text).dump(),
            R"({"role":"assistant","content":"On it.","tool_calls":[{"id":"call_1","type":"function",)"
            R"("function":{"name":"f","arguments":{"b":1,"a":[2]}}}]})");
  EXPECT_EQ(assistant_message(parse("Hello", ToolCallFormat::hermes), "Hello").dump(),
            R"({"role":"assistant","content":"Hello"})");
  // With errors: the turn as the model wrote it, no calls.
  const std::string bad = "<tool_call>{\"name\": \"f\"</tool_call>";
  EXPECT_EQ(assistant_message(parse(bad, ToolCallFormat::hermes), bad).dump(),
            ordered_json({{"role", "assistant"}, {"content", bad}}).dump());
}

// ---- continuations on small templates ------------------------------------------------------------

TEST(ChatDelta, ChatMLContinuationStartsAfterTheEndOfTurn) {
  const ChatTemplate chatml = chat_template_named("chatml");
  ChatRenderOptions o;
  EXPECT_EQ(render_continuation(chatml, ordered_json::parse(R"([{"role": "user", "content": "Hi"}])"), o),
            "\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ToolResult> results = {{"call_1", "f", "42"}};
  EXPECT_EQ(render_tool_results(chatml, results, o), "\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tool_result_messages(results).dump(),
            R"([{"role":"tool","content":"42","tool_call_id":"call_1","name":"f"}])");
  // llama3 renders no newline after <|eot_id|>.
  EXPECT_EQ(
      render_continuation(chat_template_named("llama3"), ordered_json::parse(R"([{"role": "user", "content": "Hi"}])"),
                          o),
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_THROW(render_continuation(chatml, ordered_json::object(), o), Error);
}

TEST(ChatDelta, ProbesSatisfyTheTemplatesRules) {
  // Refuses a conversation without a system message first: the probe with one is used.
  const ChatTemplate needs_system(
      "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}"
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>\n{% endfor %}{% if add_generation_prompt %}<assistant>"
      "{% endif %}",
      {}, "needs_system");
  ChatRenderOptions o;
  EXPECT_EQ(render_continuation(needs_system, ordered_json::parse(R"([{"role": "user", "content": "U2"}])"), o),
            "\n<user>U2</s>\n<assistant>");
  // Writes the last assistant turn differently: no probe is an append; the error names the template and byte.
  const ChatTemplate last_differs(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if loop.last %}!{% endif %}</s>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}",
      {}, "last_differs");
  try {
    render_continuation(last_differs, ordered_json::parse(R"([{"role": "user", "content": "U2"}])"), o);
    ADD_FAILURE() << "expected a temper::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("chat template 'last_differs' renders no probe conversation"), std::string::npos) << what;
    EXPECT_NE(
        what.find(
            "probe [user, assistant]: the render with the new messages is not an append: they differ at "
            "byte 57: \"istant>TEMPERPROBEANSWER!</s>\" vs \"istant>TEMPERPROBEANSWER</s><user>U2!</s><assistant>\""),
        std::string::npos)
        << what;
  }
}

// ---- real templates against transformers ---------------------------------------------------------

const ordered_json& goldens() {
  static const ordered_json g = ordered_json::parse(read_file(test::test_data("tool_calls/goldens.json")));
  return g;
}

// {"keep": k, "add": s} -> base[:k] + s
std::string apply_edit(const std::string& base, const ordered_json& e) {
  return base.substr(0, e["keep"].get<size_t>()) + e["add"].get<std::string>();
}

std::string str_or_empty(const ordered_json& j) {
  return j.is_string() ? j.get<std::string>() : "";
}

ordered_json concat(const ordered_json& a, const ordered_json& b) {
  ordered_json out = a;
  for (const auto& m : b) out.push_back(m);
  return out;
}

// What each case shows, computed from our renders (the table of the report).
struct CaseResult {
  bool turn_is_generated = false, full_is_append = false, continuation_ok = false;
};

TEST(ToolCallsGolden, RoundTripAndContinuationMatchTransformers) {
  SKIP_WITHOUT_TEMPLATES();
  const ordered_json& g = goldens();
  std::map<std::string, std::unique_ptr<ChatTemplate>> templates;
  const std::map<std::string, ToolCallFormat> format = {
      {"qwen2.5", ToolCallFormat::hermes},           {"qwen3", ToolCallFormat::hermes},
      {"hermes3", ToolCallFormat::hermes},           {"llama3.1", ToolCallFormat::llama3_json},
      {"llama3.2", ToolCallFormat::llama3_json},     {"mistral-nemo", ToolCallFormat::mistral},
      {"mistral-small-3.2", ToolCallFormat::mistral}};
  int n = 0, n_continuations = 0;
  std::vector<std::string> refused;
  for (const auto& c : g["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const std::string what = name + " / " + c["name"].get<std::string>();
    const ordered_json& entry = g["templates"][name];
    auto& t = templates[name];
    if (!t) {
      const std::string src = read_file(test::test_data("../../" + entry["path"].get<std::string>()));
      ASSERT_FALSE(src.empty()) << entry["path"];
      EXPECT_EQ(detect_tool_call_format(src), format.at(name)) << name;
      t = std::make_unique<ChatTemplate>(
          src, ChatTokens{str_or_empty(entry["bos_token"]), str_or_empty(entry["eos_token"]), "", ""}, name);
    }
    ChatRenderOptions o;
    o.tools = g["tools"];
    o.kwargs = c["kwargs"];
    o.now = pinned_now();
    const std::string eot = chat_end_of_turn(*t, o);
    EXPECT_EQ(eot, entry["eos_token"].get<std::string>()) << what;

    // Parse what the model generated into the message transformers renders.
    const std::string generated = c["generated"].get<std::string>();
    const ParsedTurn turn = parse_tool_calls(generated, format.at(name));
    EXPECT_TRUE(turn.errors.empty()) << what << ": " << (turn.errors.empty() ? "" : turn.errors[0]);
    const ordered_json message = assistant_message(turn, generated);
    EXPECT_EQ(message, c["message"]) << what << ": " << message.dump() << " vs " << c["message"].dump();

    // Our renders of that conversation equal transformers'.
    const ordered_json& r = c["renders"];
    const std::string want_prompt = apply_edit(entry["preamble"].get<std::string>(), r["prompt"]);
    const std::string want_with = apply_edit(want_prompt, r["with_assistant"]);
    const std::string want_full = apply_edit(want_with, r["full"]);
    const ordered_json history = c["history"];
    const ordered_json with_assistant = concat(history, ordered_json::array({message}));
    ChatRenderOptions gen = o, no_gen = o;
    gen.add_generation_prompt = true;
    no_gen.add_generation_prompt = false;
    const std::string prompt = t->render(history, gen);
    const std::string with = t->render(with_assistant, no_gen);
    const std::string full = t->render(concat(with_assistant, c["after"]), gen);
    EXPECT_EQ(prompt, want_prompt) << what;
    EXPECT_EQ(with, want_with) << what;
    EXPECT_EQ(full, want_full) << what;

    // The sampled text + end-of-turn is the training render of the turn (where the template allows it).
    const std::string sampled = prompt + generated + eot;
    const bool turn_is_generated =
        with.starts_with(sampled) && with.find_first_not_of(" \t\n", sampled.size()) == std::string::npos;
    EXPECT_EQ(turn_is_generated, c["turn_is_generated"].get<bool>()) << what;

    // The continuation: what the full render has after the turn's end-of-turn marker.
    const bool append = full.starts_with(with);
    EXPECT_EQ(append, c["full_is_append"].get<bool>()) << what;
    std::string cont;
    try {
      cont = render_continuation(*t, c["after"], o);
    } catch (const Error& e) {
      refused.push_back(what);
      EXPECT_FALSE(append) << what << ": " << e.what();
      EXPECT_THROW(render_continuation_after(*t, with_assistant, c["after"], o), Error) << what;
      ++n;
      continue;
    }
    EXPECT_TRUE(full.ends_with(cont)) << what << ": continuation " << ordered_json(cont).dump();
    if (append) {
      const size_t cut = with.rfind(eot) + eot.size();
      EXPECT_EQ(full, with.substr(0, cut) + cont) << what;
      EXPECT_EQ(render_continuation_after(*t, with_assistant, c["after"], o), cont) << what;
      ++n_continuations;
    } else {
      // The template re-renders the turn once messages follow it; the probe's delta still is the append.
      EXPECT_THROW(render_continuation_after(*t, with_assistant, c["after"], o), Error) << what;
    }
    ++n;
  }
  EXPECT_EQ(n, 18);
  EXPECT_EQ(n_continuations, 16);
  // Qwen3 drops the <think> of an answer once a user turn follows: no append exists.
  EXPECT_EQ(refused, std::vector<std::string>{"qwen3 / think_answer_then_user"});
}

TEST(ToolCallsGolden, ToolResultContinuationsPerTemplate) {
  SKIP_WITHOUT_TEMPLATES();
  const ordered_json& g = goldens();
  const std::vector<ToolResult> results = {{"abc123def", "get_weather", "22 degrees, sunny"}};
  const std::map<std::string, std::string> want = {
      {"qwen2.5",
       "\n<|im_start|>user\n<tool_response>\n22 degrees, sunny\n</tool_response><|im_end|>\n"
       "<|im_start|>assistant\n"},
      {"qwen3",
       "\n<|im_start|>user\n<tool_response>\n22 degrees, sunny\n</tool_response><|im_end|>\n"
       "<|im_start|>assistant\n"},
      {"hermes3",
       "\n<|im_start|>tool\n<tool_response>\n22 degrees, sunny\n</tool_response><|im_end|>"
       "<|im_start|>assistant\n"},
      {"llama3.1",
       "<|start_header_id|>ipython<|end_header_id|>\n\n\"22 degrees, sunny\"<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"mistral-nemo", "[TOOL_RESULTS]{\"content\": 22 degrees, sunny, \"call_id\": \"abc123def\"}[/TOOL_RESULTS]"},
      {"mistral-small-3.2", "[TOOL_RESULTS]abc123def[TOOL_CONTENT]22 degrees, sunny[/TOOL_RESULTS]"},
  };
  for (const auto& [name, text] : want) {
    const ordered_json& entry = g["templates"][name];
    const ChatTemplate t(read_file(test::test_data("../../" + entry["path"].get<std::string>())),
                         ChatTokens{str_or_empty(entry["bos_token"]), str_or_empty(entry["eos_token"]), "", ""}, name);
    ChatRenderOptions o;
    o.tools = g["tools"];
    EXPECT_EQ(render_tool_results(t, results, o), text) << name;
  }
}

TEST(ToolCallsGolden, NonCanonicalJsonIsNotItsTrainingRender) {
  // The template re-serialises arguments (tojson: ", " and ": "): a compact call parses to the same
  // message, whose render is not the sampled text. Training must keep the sampled tokens.
  SKIP_WITHOUT_TEMPLATES();
  const ordered_json& entry = goldens()["templates"]["qwen2.5"];
  const ChatTemplate t(read_file(test::test_data("../../" + entry["path"].get<std::string>())), ChatTokens{},
                       "qwen2.5");
  const std::string compact =
      "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>";
  const ParsedTurn turn = parse_tool_calls(compact, ToolCallFormat::hermes);
  ASSERT_EQ(turn.calls.size(), 1u);
  ChatRenderOptions o;
  o.add_generation_prompt = false;
  const ordered_json conv =
      ordered_json::array({{{"role", "user"}, {"content", "Weather?"}}, assistant_message(turn, compact)});
  EXPECT_EQ(t.render(conv, o),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n");
}

}  // namespace
