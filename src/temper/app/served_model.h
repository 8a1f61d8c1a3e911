// What `temper serve` and client-mode RL serve: the model's name, tokenizer, chat template (or a named one),
// end-of-sequence and end-of-turn ids, tool-call parser, context and the engine's limits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temper/model/config.h"
#include "temper/serve/server.h"
#include "temper/text/tokenizer.h"

namespace temper::app {

// chat_template: "" for the model's own; tool_call_format: "auto" (from the template) or a format's name.
serve::ServedModel make_served_model(const std::string& name, std::shared_ptr<const text::Tokenizer> tok,
                                     const std::vector<int32_t>& eos_ids, const std::string& chat_template,
                                     const std::string& tool_call_format, const ModelConfig& cfg, int64_t max_seqs,
                                     int64_t kv_tokens);

}  // namespace temper::app
