// The OpenAI API's request bodies, read and checked: /v1/chat/completions and /v1/completions
// parsed into what the rollout engine needs (sampler, token caps, stops, n, logprobs, streaming),
// and every bad request turned into an ApiError with OpenAI's error shape
// {"error": {"message", "type", "param", "code"}} and a 4xx status. Fields temper does not
// implement (logit_bias, response_format other than text, echo, suffix, tool_choice "required")
// are refused by name; unknown fields are ignored (as vLLM does). Follows the OpenAI API reference
// (chat/completions, completions) and vLLM's protocol checks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "temper/rollout/sampler.h"

namespace temper::serve {

// An error the client caused (or a limit it hit): the HTTP status and OpenAI's error object.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {},
           std::string type = {});
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // empty: null
  const std::string& code() const { return code_; }    // empty: null
  // {"error": {"message", "type", "param", "code"}}
  nlohmann::json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// What a request is checked against.
struct ServeLimits {
  std::string model;    // the served model's name (the `model` field must equal it)
  int64_t context = 0;  // positions: prompt + completion
  int64_t vocab = 0;    // token ids in a prompt must be below it
  int64_t max_n = 1;    // most samples per request (the engine's max_seqs)
  int64_t max_top_logprobs = 20;
  int64_t max_stop = 4;  // stop strings per request
};

// The sampling fields both endpoints share.
struct Sampling {
  rollout::SamplerConfig sampler;     // temperature 0 (or top_p 0): greedy
  std::optional<int64_t> max_tokens;  // the completion's cap (absent: the endpoint's default)
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;  // absent: a fresh seed per request
  int64_t n = 1;
  bool logprobs = false;     // each token's log-prob under the policy
  int64_t top_logprobs = 0;  // and the k most likely tokens there
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct ChatRequest {
  nlohmann::ordered_json messages;  // as the chat template takes them (tool-call arguments as objects)
  nlohmann::ordered_json tools;     // the function schemas; null: none (or tool_choice "none")
  Sampling s;
};

struct CompletionRequest {
  std::string prompt;               // text, or
  std::vector<int32_t> prompt_ids;  // token ids (prompt_is_ids)
  bool prompt_is_ids = false;
  Sampling s;
};

// A JSON object, or ApiError 400 naming what is wrong with the body.
nlohmann::ordered_json parse_json_object(std::string_view body);
ChatRequest parse_chat_request(std::string_view body, const ServeLimits& lim);
CompletionRequest parse_completion_request(std::string_view body, const ServeLimits& lim);

// The completion's token cap for a prompt of `prompt_tokens`: max_tokens when given, else
// `default_max` (<= 0: the rest of the context) cut to the context. ApiError 400
// (context_length_exceeded) when the prompt, or the prompt plus max_tokens, does not fit.
int64_t resolve_max_new(const Sampling& s, int64_t prompt_tokens, const ServeLimits& lim, int64_t default_max);

// JSON text for a response: invalid UTF-8 (a token cut inside a character) replaced, never a throw.
std::string dump_json(const nlohmann::ordered_json& j);
std::string dump_json(const nlohmann::json& j);

}  // namespace temper::serve
