// Continuations after an assistant turn (see chat_delta.h): two renders per probe, the append
// checked byte for byte, the delta cut after the turn's end-of-turn marker.
#include "temper/text/chat_delta.h"

#include <ctime>
#include <vector>

#include "temper/core/error.h"

namespace temper::text {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kQuestion = "TEMPERPROBEQUESTION";
constexpr std::string_view kAnswer = "TEMPERPROBEANSWER";
constexpr std::string_view kSystem = "TEMPERPROBESYSTEM";

Json message(std::string_view role, std::string_view content) {
  Json m = Json::object();
  m["role"] = role;
  m["content"] = content;
  return m;
}

// The options both renders use: `now` pinned once (a date header must not change between them).
ChatRenderOptions pinned(const ChatRenderOptions& opts) {
  ChatRenderOptions o = opts;
  if (!o.now) {
    const std::time_t now = std::time(nullptr);
    std::tm t{};
    localtime_r(&now, &t);
    o.now = t;
  }
  return o;
}

// "byte N: <short's text there> vs <long's text there>", the texts JSON-quoted.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i >= 24 ? i - 24 : 0;
  auto quote = [&](const std::string& s) {
    return i >= s.size() ? std::string("<end>")
                         : Json(s.substr(from, i - from + 40)).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  return "byte " + std::to_string(i) + ": " + quote(a) + " vs " + quote(b);
}

// Where the turn ends in `render` (a conversation ending with an assistant message): after its last
// end-of-turn marker; `fallback` when the template shows none.
size_t turn_end(const ChatTemplate& t, const std::string& render, const std::string& eot, size_t fallback) {
  if (eot.empty()) return fallback;
  const size_t at = render.rfind(eot);
  TEMPER_CHECK(at != std::string::npos) << "chat template '" << t.name() << "': the render of a conversation ending "
                                        << "with an assistant message has no end-of-turn marker " << Json(eot).dump();
  return at + eot.size();
}

struct Attempt {
  std::string delta, failure;  // failure empty: delta is good
};

Attempt try_continuation(const ChatTemplate& t, const Json& history, const Json& new_messages,
                         const ChatRenderOptions& o, const std::string& eot, bool cut_after_answer) {
  Json longer = history;
  for (const Json& m : new_messages) longer.push_back(m);
  ChatRenderOptions a = o, b = o;
  a.add_generation_prompt = false;
  b.add_generation_prompt = true;
  std::string shorter_text, longer_text;
  try {
    shorter_text = t.render(history, a);
    longer_text = t.render(longer, b);
  } catch (const Error& e) {
    return {"", std::string("the template refuses it: ") + e.what()};
  }
  if (!longer_text.starts_with(shorter_text)) {
    return {"", "the render with the new messages is not an append: they differ at " +
                    first_difference(shorter_text, longer_text)};
  }
  size_t fallback = shorter_text.size();
  if (cut_after_answer) {
    const size_t at = shorter_text.rfind(kAnswer);
    if (at != std::string::npos) fallback = at + kAnswer.size();
  }
  return {longer_text.substr(turn_end(t, shorter_text, eot, fallback)), ""};
}

}  // namespace

std::string chat_end_of_turn(const ChatTemplate& t, const ChatRenderOptions& opts) {
  if (!t.end_of_turn().empty()) return t.end_of_turn();
  ChatRenderOptions o = pinned(opts);
  o.add_generation_prompt = false;
  std::string out;
  for (bool system : {false, true}) {  // some templates refuse a conversation without a system message
    Json conv = Json::array({message("user", kQuestion), message("assistant", kAnswer)});
    if (system) conv.insert(conv.begin(), message("system", kSystem));
    try {
      out = t.render(conv, o);
      break;
    } catch (const Error&) {
    }
  }
  return end_of_turn_after(out, kAnswer, t.eos());  // as ChatTemplate's probe
}

std::string render_continuation(const ChatTemplate& t, const nlohmann::ordered_json& new_messages,
                                const ChatRenderOptions& opts) {
  TEMPER_CHECK(new_messages.is_array()) << "render_continuation: new_messages must be a JSON list, got "
                                        << new_messages.type_name();
  const ChatRenderOptions o = pinned(opts);
  const std::string eot = chat_end_of_turn(t, o);
  const std::string think = "<think>\nTEMPERPROBEREASONING\n</think>\n\n" + std::string(kAnswer);
  const Json user = message("user", kQuestion), system = message("system", kSystem);
  const std::vector<std::pair<std::string, Json>> probes = {
      {"[user, assistant]", Json::array({user, message("assistant", kAnswer)})},
      {"[user, assistant with <think>]", Json::array({user, message("assistant", think)})},
      {"[system, user, assistant]", Json::array({system, user, message("assistant", kAnswer)})},
      {"[system, user, assistant with <think>]", Json::array({system, user, message("assistant", think)})},
  };
  std::string failures;
  for (const auto& [name, history] : probes) {
    Attempt a = try_continuation(t, history, new_messages, o, eot, true);
    if (a.failure.empty()) return std::move(a.delta);
    failures += "; probe " + name + ": " + a.failure;
  }
  TEMPER_FAIL() << "render_continuation: chat template '" << t.name()
                << "' renders no probe conversation + the new messages as an append of the conversation alone"
                << failures;
}

std::string render_continuation_after(const ChatTemplate& t, const nlohmann::ordered_json& history,
                                      const nlohmann::ordered_json& new_messages, const ChatRenderOptions& opts) {
  TEMPER_CHECK(history.is_array() && !history.empty() && history.back().value("role", "") == "assistant")
      << "render_continuation_after: history must be a JSON list ending with an assistant message";
  TEMPER_CHECK(new_messages.is_array()) << "render_continuation_after: new_messages must be a JSON list, got "
                                        << new_messages.type_name();
  const ChatRenderOptions o = pinned(opts);
  Attempt a = try_continuation(t, history, new_messages, o, chat_end_of_turn(t, o), false);
  TEMPER_CHECK(a.failure.empty()) << "render_continuation_after: chat template '" << t.name() << "': " << a.failure;
  return std::move(a.delta);
}

nlohmann::ordered_json tool_result_messages(std::span<const ToolResult> results) {
  Json list = Json::array();
  for (const ToolResult& r : results) {
    Json m = Json::object();
    m["role"] = "tool";
    m["content"] = r.content;
    m["tool_call_id"] = r.tool_call_id;
    m["name"] = r.name;
    list.push_back(std::move(m));
  }
  return list;
}

std::string render_tool_results(const ChatTemplate& t, std::span<const ToolResult> results,
                                const ChatRenderOptions& opts) {
  return render_continuation(t, tool_result_messages(results), opts);
}

}  // namespace temper::text
