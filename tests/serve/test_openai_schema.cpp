// The OpenAI request checks of temper serve: every bad request is an ApiError with the right status,
// param and code, and good requests become the sampler, caps and stops the engine runs.
#include <gtest/gtest.h>

#include <string>

#include "temper/serve/openai_schema.h"
#include "temper/serve/sample_text.h"

namespace temper::serve {
namespace {

ServeLimits limits() {
  ServeLimits l;
  l.model = "tiny";
  l.context = 128;
  l.vocab = 1000;
  l.max_n = 8;
  return l;
}

struct Expect {
  int status;
  std::string param, code;
};

// Runs `fn`, which must throw an ApiError with the expected status/param/code; returns its message.
template <class F>
std::string expect_error(F fn, const Expect& e, const std::string& what) {
  try {
    fn();
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), e.status) << what << ": " << err.what();
    EXPECT_EQ(err.param(), e.param) << what << ": " << err.what();
    EXPECT_EQ(err.code(), e.code) << what << ": " << err.what();
    return err.what();
  }
  ADD_FAILURE() << what << ": no ApiError";
  return {};
}

std::string chat_body(const std::string& extra) {
  return R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}])" + (extra.empty() ? "" : ", " + extra) +
         "}";
}

TEST(ServeSchema, ChatDefaultsAndFields) {
  ChatRequest r = parse_chat_request(chat_body(""), limits());
  EXPECT_EQ(r.s.n, 1);
  EXPECT_FALSE(r.s.max_tokens.has_value());
  EXPECT_FALSE(r.s.sampler.greedy);
  EXPECT_FLOAT_EQ(r.s.sampler.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.s.sampler.top_p, 1.0f);
  EXPECT_TRUE(r.tools.is_null());
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "hi");

  r = parse_chat_request(chat_body(R"("temperature": 0, "max_tokens": 7, "stop": "\n\n", "seed": 42, "n": 3,
      "logprobs": true, "top_logprobs": 5, "stream": true, "stream_options": {"include_usage": true})"),
                         limits());
  EXPECT_TRUE(r.s.sampler.greedy);
  EXPECT_EQ(*r.s.max_tokens, 7);
  ASSERT_EQ(r.s.stop.size(), 1u);
  EXPECT_EQ(r.s.stop[0], "\n\n");
  EXPECT_EQ(*r.s.seed, 42u);
  EXPECT_EQ(r.s.n, 3);
  EXPECT_TRUE(r.s.logprobs);
  EXPECT_EQ(r.s.top_logprobs, 5);
  EXPECT_TRUE(r.s.stream);
  EXPECT_TRUE(r.s.include_usage);

  r = parse_chat_request(chat_body(R"("temperature": 0.7, "top_p": 0.9, "max_completion_tokens": 9, "max_tokens": 50,
      "stop": ["a", "bc"], "presence_penalty": 0.5, "top_k": -1)"),
                         limits());
  EXPECT_FLOAT_EQ(r.s.sampler.temperature, 0.7f);
  EXPECT_FLOAT_EQ(r.s.sampler.top_p, 0.9f);
  EXPECT_EQ(*r.s.max_tokens, 9) << "max_completion_tokens wins";
  EXPECT_EQ(r.s.stop.size(), 2u);
  EXPECT_FLOAT_EQ(r.s.sampler.presence_penalty, 0.5f);
  EXPECT_EQ(r.s.sampler.top_k, 0);
}

TEST(ServeSchema, ChatMessagesForTheTemplate) {
  const std::string body = R"({"model": "tiny", "messages": [
      {"role": "developer", "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}]},
      {"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
          "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "4"}],
    "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]})";
  ChatRequest r = parse_chat_request(body, limits());
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], "be brief");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["a"], 2) << "arguments parsed for the template";
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
  ASSERT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.tools[0]["function"]["name"], "add");

  r = parse_chat_request(R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
      "tools": [{"type": "function", "function": {"name": "f"}}]})",
                         limits());
  EXPECT_TRUE(r.tools.is_null()) << "tool_choice none: the template sees no tools";
}

TEST(ServeSchema, EachBadChatRequestIsA4xx) {
  const ServeLimits l = limits();
  auto chat = [&](const std::string& body) { return [&l, body] { parse_chat_request(body, l); }; };
  expect_error(chat("{not json"), {400, "", "invalid_json"}, "malformed JSON");
  expect_error(chat("[1, 2]"), {400, "", "invalid_json"}, "not an object");
  expect_error(chat(R"({"messages": [{"role": "user", "content": "hi"}]})"),
               {400, "model", "missing_required_parameter"}, "no model");
  expect_error(chat(R"({"model": 5, "messages": []})"), {400, "model", "invalid_type"}, "model not a string");
  const std::string msg = expect_error(chat(R"({"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]})"),
                                       {404, "model", "model_not_found"}, "unknown model");
  EXPECT_NE(msg.find("gpt-4"), std::string::npos);
  expect_error(chat(R"({"model": "tiny"})"), {400, "messages", "missing_required_parameter"}, "no messages");
  expect_error(chat(R"({"model": "tiny", "messages": "hi"})"), {400, "messages", "invalid_type"}, "messages a string");
  expect_error(chat(R"({"model": "tiny", "messages": []})"), {400, "messages", "invalid_value"}, "no message");
  expect_error(chat(R"({"model": "tiny", "messages": [{"content": "hi"}]})"),
               {400, "messages[0].role", "missing_required_parameter"}, "no role");
  expect_error(chat(R"({"model": "tiny", "messages": [{"role": "wizard", "content": "hi"}]})"),
               {400, "messages[0].role", "invalid_value"}, "unknown role");
  expect_error(chat(R"({"model": "tiny", "messages": [{"role": "user", "content": 5}]})"),
               {400, "messages[0].content", "invalid_type"}, "content a number");
  expect_error(chat(R"({"model": "tiny", "messages": [{"role": "user"}]})"),
               {400, "messages[0].content", "missing_required_parameter"}, "no content");
  expect_error(
      chat(R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})"),
      {400, "messages[0].content", "unsupported_parameter"}, "image part");
  expect_error(chat(chat_body(R"("temperature": "hot")")), {400, "temperature", "invalid_type"},
               "temperature a string");
  expect_error(chat(chat_body(R"("temperature": 3)")), {400, "temperature", "invalid_value"}, "temperature > 2");
  expect_error(chat(chat_body(R"("top_p": 1.5)")), {400, "top_p", "invalid_value"}, "top_p > 1");
  expect_error(chat(chat_body(R"("max_tokens": 0)")), {400, "max_tokens", "invalid_value"}, "max_tokens 0");
  expect_error(chat(chat_body(R"("max_tokens": -5)")), {400, "max_tokens", "invalid_value"}, "max_tokens < 0");
  expect_error(chat(chat_body(R"("max_tokens": 1.5)")), {400, "max_tokens", "invalid_type"},
               "max_tokens not an integer");
  expect_error(chat(chat_body(R"("max_tokens": 129)")), {400, "max_tokens", "invalid_value"}, "max_tokens > context");
  expect_error(chat(chat_body(R"("max_completion_tokens": 0)")), {400, "max_completion_tokens", "invalid_value"},
               "max_completion_tokens 0");
  expect_error(chat(chat_body(R"("n": 0)")), {400, "n", "invalid_value"}, "n 0");
  expect_error(chat(chat_body(R"("n": 9)")), {400, "n", "invalid_value"}, "n above max_seqs");
  expect_error(chat(chat_body(R"("n": "2")")), {400, "n", "invalid_type"}, "n a string");
  expect_error(chat(chat_body(R"("stop": 5)")), {400, "stop", "invalid_type"}, "stop a number");
  expect_error(chat(chat_body(R"("stop": ["a", 1])")), {400, "stop", "invalid_type"}, "stop list with a number");
  expect_error(chat(chat_body(R"("stop": ["a", "b", "c", "d", "e"])")), {400, "stop", "invalid_value"}, "5 stops");
  expect_error(chat(chat_body(R"("stop": [""])")), {400, "stop", "invalid_value"}, "empty stop");
  expect_error(chat(chat_body(R"("seed": "x")")), {400, "seed", "invalid_type"}, "seed a string");
  expect_error(chat(chat_body(R"("logprobs": 1)")), {400, "logprobs", "invalid_type"}, "chat logprobs an integer");
  expect_error(chat(chat_body(R"("top_logprobs": 3)")), {400, "top_logprobs", "invalid_value"},
               "top_logprobs without logprobs");
  expect_error(chat(chat_body(R"("logprobs": true, "top_logprobs": 21)")), {400, "top_logprobs", "invalid_value"},
               "top_logprobs > 20");
  expect_error(chat(chat_body(R"("stream": "yes")")), {400, "stream", "invalid_type"}, "stream a string");
  expect_error(chat(chat_body(R"("stream_options": {"include_usage": true})")),
               {400, "stream_options", "invalid_value"}, "stream_options without stream");
  expect_error(chat(chat_body(R"("presence_penalty": 2.5)")), {400, "presence_penalty", "invalid_value"},
               "presence_penalty > 2");
  expect_error(chat(chat_body(R"("logit_bias": {"50256": -100})")), {400, "logit_bias", "unsupported_parameter"},
               "logit_bias");
  expect_error(chat(chat_body(R"("response_format": {"type": "json_object"})")),
               {400, "response_format", "unsupported_parameter"}, "json mode");
  expect_error(chat(chat_body(R"("tools": {"name": "f"})")), {400, "tools", "invalid_type"}, "tools an object");
  expect_error(chat(chat_body(R"("tools": [{"type": "function"}])")), {400, "tools", "invalid_type"},
               "tool without name");
  expect_error(
      chat(chat_body(R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required")")),
      {400, "tool_choice", "unsupported_parameter"}, "tool_choice required");
  expect_error(chat(R"({"model": "tiny", "messages": [{"role": "user", "content": "x", "tool_calls": []}]})"),
               {400, "messages[0].tool_calls", "invalid_value"}, "tool_calls on a user message");
}

TEST(ServeSchema, Completions) {
  const ServeLimits l = limits();
  CompletionRequest r = parse_completion_request(R"({"model": "tiny", "prompt": "Once upon"})", l);
  EXPECT_FALSE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt, "Once upon");
  EXPECT_FALSE(r.s.logprobs);
  r = parse_completion_request(R"({"model": "tiny", "prompt": [[1, 2, 999]], "logprobs": 2, "echo": false})", l);
  EXPECT_TRUE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 999}));
  EXPECT_TRUE(r.s.logprobs);
  EXPECT_EQ(r.s.top_logprobs, 2);
  r = parse_completion_request(R"({"model": "tiny", "prompt": ["one"], "logprobs": 0})", l);
  EXPECT_EQ(r.prompt, "one");
  EXPECT_TRUE(r.s.logprobs);
  EXPECT_EQ(r.s.top_logprobs, 0);

  auto cmpl = [&](const std::string& body) { return [&l, body] { parse_completion_request(body, l); }; };
  expect_error(cmpl(R"({"model": "tiny"})"), {400, "prompt", "missing_required_parameter"}, "no prompt");
  expect_error(cmpl(R"({"model": "tiny", "prompt": 5})"), {400, "prompt", "invalid_type"}, "prompt a number");
  expect_error(cmpl(R"({"model": "tiny", "prompt": [1, "a"]})"), {400, "prompt", "invalid_type"}, "mixed token list");
  expect_error(cmpl(R"({"model": "tiny", "prompt": [1, 1000]})"), {400, "prompt", "invalid_value"},
               "token id >= vocab");
  expect_error(cmpl(R"({"model": "tiny", "prompt": [-1]})"), {400, "prompt", "invalid_value"}, "negative token id");
  expect_error(cmpl(R"({"model": "tiny", "prompt": []})"), {400, "prompt", "invalid_value"}, "empty token list");
  expect_error(cmpl(R"({"model": "tiny", "prompt": ["a", "b"]})"), {400, "prompt", "invalid_value"}, "two prompts");
  expect_error(cmpl(R"({"model": "tiny", "prompt": "a", "logprobs": 6})"), {400, "logprobs", "invalid_value"},
               "logprobs > 5");
  expect_error(cmpl(R"({"model": "tiny", "prompt": "a", "logprobs": true})"), {400, "logprobs", "invalid_type"},
               "logprobs a boolean");
  expect_error(cmpl(R"({"model": "tiny", "prompt": "a", "echo": true})"), {400, "echo", "unsupported_parameter"},
               "echo");
  expect_error(cmpl(R"({"model": "tiny", "prompt": "a", "suffix": "end"})"), {400, "suffix", "unsupported_parameter"},
               "suffix");
  expect_error(cmpl(R"({"model": "tiny", "prompt": "a", "best_of": 3})"), {400, "best_of", "invalid_value"}, "best_of");
  expect_error(cmpl(R"({"model": "other", "prompt": "a"})"), {404, "model", "model_not_found"}, "unknown model");
}

TEST(ServeSchema, PromptAndCapMustFitTheContext) {
  const ServeLimits l = limits();  // context 128
  Sampling s;
  EXPECT_EQ(resolve_max_new(s, 100, l, 0), 28) << "no max_tokens: the rest of the context";
  EXPECT_EQ(resolve_max_new(s, 100, l, 16), 16) << "the endpoint's default";
  EXPECT_EQ(resolve_max_new(s, 120, l, 16), 8) << "the default cut to the context";
  s.max_tokens = 28;
  EXPECT_EQ(resolve_max_new(s, 100, l, 0), 28);
  s.max_tokens = 29;
  const std::string m =
      expect_error([&] { resolve_max_new(s, 100, l, 0); }, {400, "max_tokens", "context_length_exceeded"},
                   "prompt + max_tokens over the context");
  EXPECT_NE(m.find("129"), std::string::npos) << m;
  s.max_tokens.reset();
  expect_error([&] { resolve_max_new(s, 128, l, 0); }, {400, "messages", "context_length_exceeded"}, "prompt fills it");
  expect_error([&] { resolve_max_new(s, 500, l, 0); }, {400, "messages", "context_length_exceeded"},
               "prompt beyond it");
}

TEST(ServeSchema, ErrorBodyHasOpenAIsShape) {
  const ApiError e(404, "The model `x` does not exist", "model", "model_not_found");
  const nlohmann::json b = e.body();
  ASSERT_TRUE(b.contains("error"));
  EXPECT_EQ(b["error"]["message"], "The model `x` does not exist");
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "model");
  EXPECT_EQ(b["error"]["code"], "model_not_found");
  const nlohmann::json r = ApiError(429, "busy").body();
  EXPECT_EQ(r["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(r["error"]["param"].is_null());
  EXPECT_TRUE(r["error"]["code"].is_null());
  EXPECT_EQ(ApiError(500, "x").body()["error"]["type"], "server_error");
  // A token cut inside a character still gives valid JSON.
  EXPECT_EQ(dump_json(nlohmann::json{{"t", std::string("a\xe2\x82")}}), "{\"t\":\"a\xef\xbf\xbd\"}");
}

TEST(ServeSampleText, StopPrefixHeldBack) {
  EXPECT_EQ(stop_prefix_suffix("hello wor", {"world"}), 3u);
  EXPECT_EQ(stop_prefix_suffix("hello", {"world"}), 0u);
  EXPECT_EQ(stop_prefix_suffix("abc", {"c", "bcd"}), 2u);
  EXPECT_EQ(stop_prefix_suffix("abc", {"abc"}), 0u) << "a whole stop string is found, not held";
}

}  // namespace
}  // namespace temper::serve
