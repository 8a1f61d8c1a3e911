// Chat templates without a Jinja engine: the two prompt formats we support (chatml, llama3; above
// ChatFormat) are recognised from the model's template string (or named explicitly) and rendered directly.
// The reference is transformers' apply_chat_template (golden: tests/data/tokenizer/chat.json).
// Leaves out: tools, multimodal content, Llama-3.1+'s date header, Qwen3's thinking handling.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace temper::text {

struct ChatMessage {
  std::string role;  // system | user | assistant (any string is written as given)
  std::string content;
};

// The two formats:
//   chatml  <|im_start|>role\ncontent<|im_end|>\n ... (SmolLM2, Qwen2/2.5). A default system message
//           written in the template (inserted when the first message is not "system", as SmolLM2's
//           and Qwen2's templates do) is extracted from the template text.
//   llama3  <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
//           (Llama-3 Instruct; content trimmed when the template says `| trim`).
enum class ChatFormat { kChatML, kLlama3 };

struct ChatTemplate {
  ChatFormat format = ChatFormat::kChatML;
  std::string default_system;  // chatml: system message used when the conversation has none
  std::string bos;             // llama3: text written before the first message
  bool trim_content = false;   // strip whitespace around each message's content (Jinja `| trim`)
  std::string name() const;    // "chatml" | "llama3"
};

std::vector<std::string> chat_template_names();

// Recognises a model's Jinja template; bos_token is what the template's `bos_token` renders as.
// Throws temper::Error naming what was found and how to override (--chat-template chatml|llama3).
ChatTemplate chat_template_parse(std::string_view jinja, std::string_view bos_token = "");

// An explicitly named format ("chatml", "llama3"), without a default system message.
ChatTemplate chat_template_named(std::string_view name, std::string_view bos_token = "");

// override_name empty or "auto": the model's template (which must then exist); otherwise the named one.
ChatTemplate chat_template_resolve(std::string_view override_name, std::string_view model_template,
                                   std::string_view bos_token = "");

std::string chat_template_render(const ChatTemplate& tmpl, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt);

}  // namespace temper::text
