#include "temper/app/served_model.h"

#include "temper/core/error.h"
#include "temper/text/chat_template.h"
#include "temper/text/tool_calls.h"

namespace temper::app {

serve::ServedModel make_served_model(const std::string& name, std::shared_ptr<const text::Tokenizer> tok,
                                     const std::vector<int32_t>& eos_ids, const std::string& chat_template,
                                     const std::string& tool_call_format, const ModelConfig& cfg, int64_t max_seqs,
                                     int64_t kv_tokens) {
  TEMPER_CHECK(tok != nullptr) << name << ": has no tokenizer; serving needs one";
  serve::ServedModel sm;
  sm.name = name;
  sm.tokenizer = tok;
  sm.eos_ids.insert(eos_ids.begin(), eos_ids.end());
  if (tok->eos_id() >= 0) sm.eos_ids.insert(tok->eos_id());
  if (!chat_template.empty() || !tok->chat_template().empty()) {
    sm.chat_template.emplace(text::chat_template_resolve(chat_template, tok->chat_template(), text::chat_tokens(*tok)));
    if (!sm.chat_template->end_of_turn().empty()) sm.end_of_turn = tok->token_to_id(sm.chat_template->end_of_turn());
  }
  const text::ToolCallFormat format = text::tool_call_format_resolve(
      tool_call_format == "auto" ? "" : tool_call_format, sm.chat_template ? sm.chat_template->source() : "");
  sm.parse_tool_calls = serve::tool_call_parser(format);
  sm.tool_format = format;
  sm.context = cfg.max_position_embeddings;
  sm.vocab = cfg.vocab_size;
  sm.max_seqs = max_seqs;
  sm.kv_tokens = kv_tokens;
  return sm;
}

}  // namespace temper::app
