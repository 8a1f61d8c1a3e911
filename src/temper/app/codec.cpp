#include "temper/app/codec.h"

#include <cstdlib>
#include <ctime>

#include "temper/core/error.h"
#include "temper/core/settings.h"
#include "temper/rl/derived_problem.h"
#include "temper/tasks/task.h"
#include "temper/text/chat_delta.h"
#include "temper/text/chat_template.h"
#include "temper/text/tool_calls.h"

namespace temper::app {

rl::PromptCodec make_codec(std::shared_ptr<const text::Tokenizer> tok, const std::vector<int32_t>& eos_ids,
                           const std::string& format, const std::string& system_prompt,
                           const std::string& user_template) {
  TEMPER_CHECK(tok) << "the model has no tokenizer: RL needs one (tokenizer.json or GGUF tokenizer metadata)";
  TEMPER_CHECK(user_template.empty() || user_template.find("{question}") != std::string::npos)
      << "the user template must contain {question} (where the problem's text goes), got '" << user_template << "'";
  auto phrase = [user_template](const std::string& question) {
    return user_template.empty() ? question : rl::fill_template(user_template, {{"{question}", question}});
  };
  // The user turn: a method's text as asked (rl/derived_problem.h), else the problem's question phrased.
  auto user_text = [phrase](const tasks::Problem& p) { return p.asked.empty() ? phrase(p.prompt) : p.asked; };
  TEMPER_CHECK(format == "raw" || format == "chat" || format == "auto")
      << "prompt format must be raw, chat or auto, got '" << format << "'";
  bool chat = format == "chat" || (format == "auto" && !tok->chat_template().empty());
  rl::PromptCodec c;
  c.stop_ids.insert(eos_ids.begin(), eos_ids.end());
  if (tok->eos_id() >= 0) c.stop_ids.insert(tok->eos_id());
  int32_t end = tok->eos_id() >= 0 ? tok->eos_id() : (eos_ids.empty() ? -1 : eos_ids.front());
  if (chat) {
    auto tmpl = std::make_shared<text::ChatTemplate>(
        text::chat_template_resolve("", tok->chat_template(), text::chat_tokens(*tok)));
    const int32_t eot = tmpl->end_of_turn().empty() ? -1 : tok->token_to_id(tmpl->end_of_turn());
    if (eot >= 0) {
      c.stop_ids.insert(eot);
      end = eot;
    }
    c.encode_prompt = [tok, tmpl, system_prompt, user_text](const tasks::Problem& p) {
      std::vector<text::ChatMessage> msgs;
      // A row's own system turn wins over model.system_prompt (one system turn, the row's).
      const bool own_system = !p.messages.empty() && p.messages.front().role == "system";
      if (!system_prompt.empty() && !own_system) msgs.push_back({"system", system_prompt});
      if (p.messages.empty()) {
        msgs.push_back({"user", user_text(p)});
      } else {
        for (const auto& m : p.messages) msgs.push_back({m.role, m.content});
      }
      return tok->encode(tmpl->render(msgs, /*add_generation_prompt=*/true), false);
    };
  } else {
    c.encode_prompt = [tok, user_text](const tasks::Problem& p) {
      std::vector<int32_t> ids = tok->prefix_ids();
      std::vector<int32_t> body = tok->encode(user_text(p), false);
      ids.insert(ids.end(), body.begin(), body.end());
      return ids;
    };
  }
  if (!user_template.empty()) c.phrase = phrase;
  TEMPER_CHECK(end >= 0) << "the tokenizer has no end token (EOS): completions could not stop";
  c.encode_completion = [tok, end](const std::string& text) {
    std::vector<int32_t> ids = tok->encode(text, false, /*parse_special=*/false);
    ids.push_back(end);
    return ids;
  };
  c.encode_text = [tok](const std::string& text) { return tok->encode(text, false, /*parse_special=*/false); };
  c.decode = [tok](const std::vector<int32_t>& ids) { return tok->decode(ids, /*skip_special=*/true); };
  c.token_bytes = [tok](int32_t id) { return tok->token_bytes(id); };
  return c;
}

rl::ConversationCodec make_conversation_codec(std::shared_ptr<const text::Tokenizer> tok,
                                              const std::vector<int32_t>& eos_ids, const std::string& system_prompt,
                                              const std::string& tool_format) {
  using json = nlohmann::ordered_json;
  TEMPER_CHECK(tok && !tok->chat_template().empty())
      << "[env] needs the model's chat template (tokenizer_config.json chat_template or GGUF tokenizer.chat_template)";
  auto tmpl = std::make_shared<text::ChatTemplate>(
      text::chat_template_resolve("", tok->chat_template(), text::chat_tokens(*tok)));
  const text::ToolCallFormat fmt = text::tool_call_format_resolve(tool_format, tmpl->source());
  text::ChatRenderOptions base;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  base.now = tm;
  const std::string eot_text = text::chat_end_of_turn(*tmpl, base);
  rl::ConversationCodec c;
  c.stop_ids.insert(eos_ids.begin(), eos_ids.end());
  if (tok->eos_id() >= 0) c.stop_ids.insert(tok->eos_id());
  c.end_of_turn = eot_text.empty() ? tok->eos_id() : tok->token_to_id(eot_text);
  if (c.end_of_turn >= 0) c.stop_ids.insert(c.end_of_turn);
  TEMPER_CHECK(!c.stop_ids.empty()) << "[env]: the model has neither an end-of-turn token nor EOS: turns could not end";
  auto options = [base](const json& tools) {
    text::ChatRenderOptions o = base;
    if (!tools.is_null() && !tools.empty()) o.tools = tools;
    return o;
  };
  c.encode_start = [tok, tmpl, options, system_prompt](const json& messages, const json& tools) {
    json msgs = json::array();
    const bool own_system = !messages.empty() && messages.front().value("role", "") == "system";
    if (!system_prompt.empty() && !own_system) msgs.push_back({{"role", "system"}, {"content", system_prompt}});
    for (const json& m : messages) msgs.push_back(m);
    return tok->encode(tmpl->render(msgs, options(tools)), false);
  };
  c.encode_continuation = [tok, tmpl, options](const json& messages, const json& tools) {
    return tok->encode(text::render_continuation(*tmpl, messages, options(tools)), false);
  };
  // The turn as the model wrote it, without the end-of-turn text (or EOS) that stopped it.
  std::vector<std::string> ends;
  for (int32_t id : c.stop_ids) ends.push_back(tok->decode(std::vector<int32_t>{id}, /*skip_special=*/false));
  c.assistant_message = [tok, fmt, ends](const std::vector<int32_t>& turn) {
    std::string text = tok->decode(turn, /*skip_special=*/false);
    for (const std::string& e : ends)
      if (!e.empty() && text.size() >= e.size() && text.compare(text.size() - e.size(), e.size(), e) == 0) {
        text.resize(text.size() - e.size());
        break;
      }
    const text::ParsedTurn parsed = text::parse_tool_calls(text, fmt);
    json msg = text::assistant_message(parsed, text);
    if (!parsed.errors.empty()) msg["parse_errors"] = parsed.errors;
    return msg;
  };
  c.decode = [tok](const std::vector<int32_t>& ids) { return tok->decode(ids, /*skip_special=*/true); };
  return c;
}

PromptLengths measure_prompts(const tasks::Task& task, tasks::Split split, const rl::PromptCodec& codec, int64_t limit,
                              int64_t stream_rows) {
  PromptLengths m;
  const int64_t size = task.size(split);
  const int64_t n = size < 0 ? stream_rows : size;
  for (int64_t i = 0; i < n; ++i) {
    tasks::Problem p = task.problem(split, static_cast<uint64_t>(i));
    const auto len = static_cast<int64_t>(codec.encode_prompt(p).size());
    ++m.measured;
    if (len > m.longest) {
      m.longest = len;
      m.longest_id = p.id;
    }
    if (limit > 0 && len > limit) m.over.push_back(static_cast<uint64_t>(i));
  }
  return m;
}

std::string unescape_newlines(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace temper::app
