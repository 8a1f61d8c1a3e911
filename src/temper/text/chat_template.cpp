// Chat template recognition and rendering (see chat_template.h). Recognition looks for each
// format's marker tokens in the Jinja source; the default system prompt is the literal text of a
// '<|im_start|>system\n...<|im_end|>' string in the template (no quote inside, so it is not built
// from a message).
#include "temper/text/chat_template.h"

#include "temper/core/error.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

bool contains(std::string_view s, std::string_view x) {
  return s.find(x) != std::string_view::npos;
}

// Jinja string-literal escapes we meet in templates.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char c = s[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string default_system_prompt(std::string_view tmpl) {
  constexpr std::string_view kHead = "<|im_start|>system";
  constexpr std::string_view kEnd = "<|im_end|>";
  for (size_t at = tmpl.find(kHead); at != std::string_view::npos; at = tmpl.find(kHead, at + 1)) {
    size_t p = at + kHead.size();
    if (tmpl.substr(p, 2) == "\\n") {
      p += 2;
    } else if (tmpl.substr(p, 1) == "\n") {
      p += 1;
    } else {
      continue;
    }
    const size_t end = tmpl.find(kEnd, p);
    if (end == std::string_view::npos) continue;
    const std::string_view body = tmpl.substr(p, end - p);
    if (body.empty() || body.find_first_of("'\"{}") != std::string_view::npos) continue;
    return unescape(body);
  }
  return {};
}

// `content | trim` / `content'] | trim` / `content|trim`.
bool trims_content(std::string_view tmpl) {
  for (size_t at = tmpl.find("content"); at != std::string_view::npos; at = tmpl.find("content", at + 1)) {
    size_t p = at + 7;
    while (p < tmpl.size() && (tmpl[p] == '\'' || tmpl[p] == '"' || tmpl[p] == ']' || tmpl[p] == ' ')) ++p;
    if (p < tmpl.size() && tmpl[p] == '|') {
      ++p;
      while (p < tmpl.size() && tmpl[p] == ' ') ++p;
      if (tmpl.substr(p, 4) == "trim") return true;
    }
  }
  return false;
}

std::string python_strip(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    const Utf8Char c = utf8_next(s, b);
    if (!c.valid || !is_python_whitespace(c.cp)) break;
    b += c.len;
  }
  // Find the end: scan forward remembering the end of the last non-space character.
  size_t last = b;
  for (size_t i = b; i < e;) {
    const Utf8Char c = utf8_next(s, i);
    i += c.len;
    if (!c.valid || !is_python_whitespace(c.cp)) last = i;
  }
  return std::string(s.substr(b, last - b));
}

std::string excerpt(std::string_view s) {
  std::string x(s.substr(0, 80));
  for (char& c : x) {
    if (c == '\n') c = ' ';
  }
  return s.size() > 80 ? x + "..." : x;
}

}  // namespace

std::string ChatTemplate::name() const {
  return format == ChatFormat::kLlama3 ? "llama3" : "chatml";
}

std::vector<std::string> chat_template_names() {
  return {"chatml", "llama3"};
}

ChatTemplate chat_template_parse(std::string_view jinja, std::string_view bos_token) {
  const bool chatml = contains(jinja, "<|im_start|>") && contains(jinja, "<|im_end|>");
  const bool llama3 =
      contains(jinja, "<|start_header_id|>") && contains(jinja, "<|end_header_id|>") && contains(jinja, "<|eot_id|>");
  ChatTemplate t;
  if (chatml && !llama3) {
    t.format = ChatFormat::kChatML;
    t.default_system = default_system_prompt(jinja);
    t.trim_content = trims_content(jinja);
    return t;
  }
  if (llama3 && !chatml) {
    TEMPER_CHECK(!contains(jinja, "Cutting Knowledge Date"))
        << "chat template: a Llama-3.1+ template (it writes a 'Cutting Knowledge Date' system header), which is not "
           "supported; override with --chat-template llama3 for the plain Llama-3 format";
    t.format = ChatFormat::kLlama3;
    if (contains(jinja, "bos_token")) {
      t.bos = std::string(bos_token);
    } else if (contains(jinja, "<|begin_of_text|>")) {
      t.bos = "<|begin_of_text|>";
    }
    t.trim_content = trims_content(jinja);
    return t;
  }
  TEMPER_FAIL() << "chat template not recognised: "
                << (chatml ? "it has both ChatML (<|im_start|>, <|im_end|>) and Llama-3 markers"
                           : "it has neither the ChatML markers (<|im_start|>, <|im_end|>) nor the Llama-3 markers "
                             "(<|start_header_id|>, <|end_header_id|>, <|eot_id|>)")
                << "; it begins '" << excerpt(jinja)
                << "'. Override with --chat-template chatml|llama3, or skip the template with --raw";
}

ChatTemplate chat_template_named(std::string_view name, std::string_view bos_token) {
  ChatTemplate t;
  if (name == "chatml") {
    t.format = ChatFormat::kChatML;
  } else if (name == "llama3") {
    t.format = ChatFormat::kLlama3;
    t.bos = bos_token.empty() ? "<|begin_of_text|>" : std::string(bos_token);
    t.trim_content = true;
  } else {
    TEMPER_FAIL() << "unknown chat template name '" << name << "'; known: chatml, llama3 (or auto: the model's own)";
  }
  return t;
}

ChatTemplate chat_template_resolve(std::string_view override_name, std::string_view model_template,
                                   std::string_view bos_token) {
  if (!override_name.empty() && override_name != "auto") return chat_template_named(override_name, bos_token);
  TEMPER_CHECK(!model_template.empty())
      << "the model has no chat template (tokenizer.chat_template / tokenizer_config.json chat_template); "
         "pass --chat-template chatml|llama3, or --raw for plain continuation";
  return chat_template_parse(model_template, bos_token);
}

std::string chat_template_render(const ChatTemplate& t, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) {
  std::string out;
  auto content = [&](const std::string& c) { return t.trim_content ? python_strip(c) : c; };
  if (t.format == ChatFormat::kChatML) {
    if (!messages.empty() && !t.default_system.empty() && messages[0].role != "system") {
      out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
    }
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + content(m.content) + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else {
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i == 0) out += t.bos;
      out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + content(messages[i].content) +
             "<|eot_id|>";
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

}  // namespace temper::text
