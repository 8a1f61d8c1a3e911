// Chat templates: the model's Jinja chat_template (tokenizer_config.json or GGUF
// tokenizer.chat_template) rendered by our Jinja interpreter (text/jinja/) exactly as transformers'
// apply_chat_template renders it (4.51.3 with Jinja2 3.1.6: trim_blocks, lstrip_blocks, its tojson,
// raise_exception and strftime_now; messages, tools, documents, add_generation_prompt, the special
// tokens and extra kwargs such as enable_thinking as template variables). Goldens:
// tests/data/chat_templates/renders.json (tools/ref/make_chat_template_goldens.py). The names
// chatml and llama3 are built-in templates rendered the same way.
// Leaves out: continue_final_message, assistant-token masks ({% generation %} renders its body).
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace temper::text {

namespace jinja {
class Template;
}
class Tokenizer;

struct ChatMessage {
  std::string role;  // system | user | assistant | tool ... (any string is passed as given)
  std::string content;
};

// What the template sees as bos_token, eos_token...: only the non-empty ones are defined, as in
// transformers' special_tokens_map.
struct ChatTokens {
  std::string bos = {}, eos = {}, unk = {}, pad = {};
};

// The tokenizer's bos/eos/unk/pad strings (empty where it has none).
ChatTokens chat_tokens(const Tokenizer& tok);

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;      // a list of JSON schemas; null: the template sees tools = none
  nlohmann::ordered_json documents;  // a list of {title, text}; null: none
  // Further template variables (enable_thinking, date_string, ...); they override the special tokens.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // The time strftime_now() formats; unset: the local clock (as transformers). Tests pin it.
  std::optional<std::tm> now;
};

class ChatTemplate {
 public:
  // Parses `source`; a syntax error or a construct outside the interpreter's subset is a
  // temper::Error naming it and its line:col. `name` labels messages ("chatml", "model", ...).
  ChatTemplate(std::string_view source, ChatTokens tokens, std::string name = "model");

  // messages: a list of {role, content, optional tool_calls, tool_call_id, name, reasoning_content...}.
  // raise_exception() in the template, or a render error, is a temper::Error with the template's line.
  std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  const std::string& eos() const { return tokens_.eos; }

  // The text closing an assistant turn ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "</s>"...),
  // found by rendering a probe conversation: a <...> text or the EOS; empty when the probe does not
  // render or shows neither.
  const std::string& end_of_turn() const { return end_of_turn_; }

 private:
  std::string name_, source_;
  ChatTokens tokens_;
  std::shared_ptr<const jinja::Template> tmpl_;
  std::string end_of_turn_;
};

// The end-of-turn text in a render of a conversation whose last assistant message is `answer`: the non-space run
// after it, when that is a <...> text or the EOS (a plain ']' must not become a stop token); empty otherwise.
std::string end_of_turn_after(std::string_view rendered, std::string_view answer, const std::string& eos);

// The built-in templates: chatml (<|im_start|>role\ncontent<|im_end|>\n, no default system
// message) and llama3 (Llama-3-Instruct's template; BOS <|begin_of_text|> unless tokens.bos is set).
std::vector<std::string> chat_template_names();
ChatTemplate chat_template_named(std::string_view name, const ChatTokens& tokens = {});

// override_name empty or "auto": the model's template (which must then exist); otherwise the named one.
ChatTemplate chat_template_resolve(std::string_view override_name, std::string_view model_template,
                                   const ChatTokens& tokens = {});

}  // namespace temper::text
