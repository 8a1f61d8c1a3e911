// `temper serve`'s HTTP side: OpenAI-compatible routes on cpp-httplib (Debian's libcpp-httplib-dev)
// over a Backend. GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions (messages through
// the chat template with the generation prompt, tools passed to it), POST /v1/completions (a
// string or token-id prompt), GET /health and GET /stats. Streaming is SSE ("data: {json}\n\n"
// chunks, then "data: [DONE]"). Every bad request is a JSON 4xx in OpenAI's shape (serve/
// openai_schema.h), including 404 (route), 405 (method), 413 (body over the limit) and 429 (more
// than max_concurrency generation requests in flight). Handler threads only tokenize, queue a
// GenJob and wait on it; the Backend batches. Leaves out: authentication, several models, batch
// prompts in one /v1/completions request, echo.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "temper/serve/generation.h"
#include "temper/serve/openai_schema.h"
#include "temper/text/chat_template.h"
#include "temper/text/tokenizer.h"
#include "temper/text/tool_calls.h"

namespace httplib {
class Server;
}

namespace temper::serve {

// An assistant reply split into its text and the tool calls it made (OpenAI's shape:
// [{"id", "type": "function", "function": {"name", "arguments": "<json string>"}}]).
struct ParsedReply {
  std::string content;
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
};

// The parser for a chat template's tool-call syntax (text/tool_calls.h); null for ToolCallFormat::none.
// Calls get unique ids ("call_" + 24 hex digits) unless the format carries its own (Mistral's); a reply
// whose calls are all malformed stays text.
std::function<ParsedReply(const std::string&)> tool_call_parser(text::ToolCallFormat format);

struct ServedModel {
  std::string name;                                  // what /v1/models lists and requests name
  std::shared_ptr<const text::Tokenizer> tokenizer;  // required
  std::optional<text::ChatTemplate> chat_template;   // absent: /v1/chat/completions answers 400
  std::set<int32_t> eos_ids;                         // end every sample
  int32_t end_of_turn = -1;                          // the template's end of turn (chat only), -1: none
  int64_t context = 0, vocab = 0;
  int64_t max_seqs = 1;   // n is at most this
  int64_t kv_tokens = 0;  // the KV cache's capacity: a request's prompt + n completions must fit (0: unchecked)
  // Parses tool calls out of a chat reply when the request had tools (null: the reply stays text).
  std::function<ParsedReply(const std::string& text)> parse_tool_calls;
  text::ToolCallFormat tool_format = text::ToolCallFormat::none;  // what parse_tool_calls reads (for messages)
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                              // 0: any free port (bind() returns it)
  int64_t max_concurrency = 64;                 // generation requests in flight; one more gets 429
  int64_t max_body_bytes = 1 << 20;             // a larger body gets 413
  int64_t completions_default_max_tokens = 16;  // /v1/completions without max_tokens (as OpenAI's)
};

class Server {
 public:
  Server(ServeOptions opts, ServedModel model, Backend& backend);
  ~Server();
  // Binds the listening socket; returns the port (the chosen one when opts.port is 0). Throws on failure.
  int bind();
  // Serves until stop(); returns once every handler (every in-flight request) has finished.
  void listen();
  // Stops accepting connections; in-flight requests run to their end. Callable from any thread.
  void stop();
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t served() const { return served_.load(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> in_flight_{0}, served_{0};
};

}  // namespace temper::serve
