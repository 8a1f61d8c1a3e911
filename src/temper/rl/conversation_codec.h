// How a multi-turn rollout turns messages into tokens and a turn's tokens into an assistant message, without
// knowing the tokenizer, the chat template or the tool-call syntax (the app builds one: app/codec.h).
// The contract the engine relies on: rendering the conversation so far and the continuation gives the
// same tokens as rendering the whole conversation, so the policy sees at rollout what it sees in training.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace temper::rl {

struct ConversationCodec {
  // The first prompt: the messages (a JSON list) and tool schemas (null: none), the generation prompt added.
  std::function<std::vector<int32_t>(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools)>
      encode_start;
  // The tokens the template puts after an assistant turn's end for `messages` (tool results, user turns),
  // through the next assistant generation prompt.
  std::function<std::vector<int32_t>(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools)>
      encode_continuation;
  // An assistant turn's tokens (its end-of-turn token included when it stopped there) as an OpenAI message
  // {role: assistant, content, tool_calls?} with "parse_errors": [...] when its tool calls were malformed.
  std::function<nlohmann::ordered_json(const std::vector<int32_t>& turn)> assistant_message;
  std::function<std::string(const std::vector<int32_t>&)> decode;  // special tokens skipped
  std::set<int32_t> stop_ids;  // a turn ends at these (the template's end of turn, EOS)
  int32_t end_of_turn = -1;    // closes a turn cut at its token cap before the observation (-1: none)
};

}  // namespace temper::rl
