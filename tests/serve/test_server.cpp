// temper serve's HTTP side over a scripted backend (no model): routes, OpenAI response shapes,
// SSE streaming equal to the plain reply, stops, n, logprobs, every HTTP-level error (404, 405,
// 413, 429, 400, 503) in OpenAI's shape, and stop() letting an in-flight request finish.
// The tokenizer and chat template are SmolLM2's (tests/data/tokenizer/smollm2).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "temper/serve/server.h"
#include "temper/text/chat_template.h"

namespace temper::serve {
namespace {

using json = nlohmann::json;

std::shared_ptr<const text::Tokenizer> smol_tokenizer() {
  const std::string dir = std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/smollm2/";
  return std::make_shared<const text::Tokenizer>(
      text::Tokenizer::from_hf_files(dir + "tokenizer.json", dir + "tokenizer_config.json"));
}

// Answers every job with the same scripted text (one token per step, `delay` apart), then the EOS,
// cut by max_new and stop strings as the engine cuts; top-k: the token itself and ids 1..k-1.
class ScriptBackend : public Backend {
 public:
  ScriptBackend(std::shared_ptr<const text::Tokenizer> tok, std::string script, int32_t eos)
      : tok_(std::move(tok)), script_(tok_->encode(script)), eos_(eos) {
    thread_ = std::thread([this] { loop(); });
  }
  ~ScriptBackend() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(std::shared_ptr<GenJob> job) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (refuse_) throw ApiError(503, "the server is shutting down", "", "shutting_down");
      jobs_.push_back(job);
      seen_.push_back(job->request);
    }
    cv_.notify_all();
  }
  int64_t steps() const override { return steps_.load(); }
  void set_delay(std::chrono::milliseconds d) { delay_ = d; }
  void refuse() { refuse_ = true; }
  std::vector<rollout::RolloutRequest> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  const std::vector<int32_t>& script() const { return script_; }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<GenJob> job;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = jobs_.front();
        jobs_.pop_front();
      }
      run(*job);
    }
  }
  void run(GenJob& job) {
    const rollout::RolloutRequest& r = job.request;
    for (int64_t m = 0; m < r.group_size; ++m) {
      GenEvent d;
      d.kind = GenEvent::Kind::done;
      d.member = m;
      std::string bytes;
      std::vector<int32_t> all = script_;
      all.push_back(eos_);
      for (int32_t t : all) {
        std::this_thread::sleep_for(delay_);
        ++steps_;
        d.tokens.push_back(t);
        d.logprobs.push_back(-0.25f * static_cast<float>(d.tokens.size()));
        if (job.top_logprobs > 0) {
          TopLogprobs top{{t, d.logprobs.back()}};
          for (int32_t k = 1; k < job.top_logprobs; ++k) top.emplace_back(k, -10.0f - k);
          d.top.push_back(top);
        }
        if (r.stop_ids.count(t)) {
          d.finish = rollout::FinishReason::stop;
          break;
        }
        bytes += tok_->token_bytes(t);
        bool hit = false;
        for (size_t i = 0; i < r.stop_strings.size() && !hit; ++i)
          if (bytes.find(r.stop_strings[i]) != std::string::npos) d.stop_string = static_cast<int32_t>(i), hit = true;
        if (hit) {
          d.finish = rollout::FinishReason::stop;
          break;
        }
        if (job.stream && job.top_logprobs == 0) {
          GenEvent e;
          e.member = m;
          e.token = t;
          e.logprob = d.logprobs.back();
          job.push(e);
        }
        if (job.cancelled()) {
          d.finish = rollout::FinishReason::hook;
          break;
        }
        if (static_cast<int64_t>(d.tokens.size()) >= r.max_new) {
          d.finish = rollout::FinishReason::length;
          break;
        }
      }
      job.push(std::move(d));
    }
  }

  std::shared_ptr<const text::Tokenizer> tok_;
  std::vector<int32_t> script_;
  int32_t eos_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenJob>> jobs_;
  std::vector<rollout::RolloutRequest> seen_;
  bool done_ = false;
  std::atomic<bool> refuse_{false};
  std::atomic<int64_t> steps_{0};
  std::chrono::milliseconds delay_{0};
  std::thread thread_;
};

const char* kScript = "Hello there! The answer is 42, as always.";

struct Fixture {
  std::shared_ptr<const text::Tokenizer> tok = smol_tokenizer();
  int32_t eos = tok->token_to_id("<|im_end|>");
  ScriptBackend backend;
  std::unique_ptr<Server> server;
  std::thread thread;
  int port = 0;

  // template_source empty: SmolLM2's own.
  explicit Fixture(ServeOptions o = {}, const std::string& script = kScript, const std::string& template_source = "",
                   text::ToolCallFormat tools = text::ToolCallFormat::none)
      : backend(tok, script, eos) {
    ServedModel m;
    m.name = "smol";
    m.tokenizer = tok;
    if (template_source.empty())
      m.chat_template.emplace(text::chat_template_resolve("", tok->chat_template(), text::chat_tokens(*tok)));
    else
      m.chat_template.emplace(template_source, text::chat_tokens(*tok));
    m.parse_tool_calls = tool_call_parser(tools);
    m.eos_ids = {eos};
    m.end_of_turn = eos;
    m.context = 256;
    m.vocab = tok->vocab_size();
    m.max_seqs = 4;
    m.kv_tokens = 600;
    o.port = 0;
    server = std::make_unique<Server>(o, std::move(m), backend);
    port = server->bind();
    thread = std::thread([this] { server->listen(); });
  }
  ~Fixture() {
    server->stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    return client().Post(path.c_str(), body, "application/json");
  }
};

std::string chat(const std::string& extra = "") {
  return R"({"model": "smol", "messages": [{"role": "user", "content": "Say hello."}])" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

// The data lines of an SSE body, each parsed ([DONE] as the string "[DONE]").
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) {
      EXPECT_TRUE(line.empty()) << "not an SSE data line: " << line;
      continue;
    }
    const std::string d = line.substr(6);
    out.push_back(d == "[DONE]" ? json("[DONE]") : json::parse(d));
  }
  return out;
}

void expect_error(const httplib::Result& r, int status, const std::string& code) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
  const json b = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(b.is_object() && b.contains("error")) << r->body;
  const json& e = b["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
  EXPECT_TRUE(e["type"].is_string()) << r->body;
  EXPECT_TRUE(e.contains("param")) << r->body;
  if (code.empty())
    EXPECT_TRUE(e["code"].is_null()) << r->body;
  else
    EXPECT_EQ(e["code"], code) << r->body;
}

TEST(ServeHttp, ModelsList) {
  Fixture f;
  auto r = f.client().Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json b = json::parse(r->body);
  EXPECT_EQ(b["object"], "list");
  ASSERT_EQ(b["data"].size(), 1u);
  EXPECT_EQ(b["data"][0]["id"], "smol");
  EXPECT_EQ(b["data"][0]["object"], "model");
  r = f.client().Get("/v1/models/smol");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["id"], "smol");
  expect_error(f.client().Get("/v1/models/other"), 404, "model_not_found");
}

TEST(ServeHttp, ChatCompletionAndItsRequest) {
  Fixture f;
  auto r = f.post("/v1/chat/completions", chat(R"("temperature": 0, "seed": 7, "stop": ["zzz"])"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json b = json::parse(r->body);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["model"], "smol");
  EXPECT_EQ(b["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  ASSERT_EQ(b["choices"].size(), 1u);
  const json& c = b["choices"][0];
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], kScript);
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_TRUE(c["logprobs"].is_null());
  // The prompt: SmolLM2's template with the generation prompt, tokenized without added specials.
  const auto seen = f.backend.seen();
  ASSERT_EQ(seen.size(), 1u);
  const text::ChatTemplate t = text::chat_template_resolve("", f.tok->chat_template(), text::chat_tokens(*f.tok));
  const std::vector<text::ChatMessage> msgs = {{"user", "Say hello."}};
  EXPECT_EQ(seen[0].prompt, f.tok->encode(t.render(msgs, true)));
  EXPECT_TRUE(seen[0].sampler.greedy);
  EXPECT_EQ(seen[0].seed, 7u);
  EXPECT_EQ(seen[0].max_new, 256 - static_cast<int64_t>(seen[0].prompt.size()))
      << "no max_tokens: the rest of the context";
  EXPECT_TRUE(seen[0].stop_ids.count(f.eos));
  EXPECT_EQ(seen[0].stop_strings, std::vector<std::string>{"zzz"});
  EXPECT_EQ(b["usage"]["prompt_tokens"], seen[0].prompt.size());
  EXPECT_EQ(b["usage"]["completion_tokens"], f.backend.script().size() + 1) << "the end-of-turn token counts";
  EXPECT_EQ(b["usage"]["total_tokens"], seen[0].prompt.size() + f.backend.script().size() + 1);
}

TEST(ServeHttp, StreamJoinsToTheSameText) {
  Fixture f;
  f.backend.set_delay(std::chrono::milliseconds(2));
  auto r = f.post("/v1/chat/completions", chat(R"("stream": true, "n": 2, "stream_options": {"include_usage": true})"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text[2];
  std::string finish[2];
  bool role[2] = {false, false};
  json usage;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const json& e = ev[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e["choices"].empty()) {
      usage = e["usage"];
      continue;
    }
    for (const json& c : e["choices"]) {
      const int m = c["index"];
      ASSERT_TRUE(m == 0 || m == 1);
      if (c["delta"].contains("role")) role[m] = true;
      if (c["delta"].contains("content")) text[m] += c["delta"]["content"].get<std::string>();
      if (!c["finish_reason"].is_null()) finish[m] = c["finish_reason"];
    }
  }
  for (int m = 0; m < 2; ++m) {
    EXPECT_TRUE(role[m]);
    EXPECT_EQ(text[m], kScript);
    EXPECT_EQ(finish[m], "stop");
  }
  ASSERT_TRUE(usage.is_object());
  EXPECT_EQ(usage["completion_tokens"], 2 * (f.backend.script().size() + 1));
}

TEST(ServeHttp, MaxTokensStopStringsAndLogprobs) {
  Fixture f;
  auto r = f.post("/v1/chat/completions", chat(R"("max_tokens": 3)"));
  ASSERT_TRUE(r);
  json b = json::parse(r->body);
  const std::vector<int32_t> first3(f.backend.script().begin(), f.backend.script().begin() + 3);
  EXPECT_EQ(b["choices"][0]["message"]["content"], f.tok->decode(first3));
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["completion_tokens"], 3);

  // The stop string is left out, in the plain reply and in the stream.
  for (bool stream : {false, true}) {
    r = f.post("/v1/chat/completions",
               chat(std::string(R"("stop": ["answer"], "stream": )") + (stream ? "true" : "false")));
    ASSERT_TRUE(r);
    std::string text;
    if (stream) {
      for (const json& e : sse_events(r->body))
        if (e.is_object())
          for (const json& c : e["choices"])
            if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    } else {
      text = json::parse(r->body)["choices"][0]["message"]["content"];
    }
    EXPECT_EQ(text, "Hello there! The ") << (stream ? "stream" : "plain");
  }

  r = f.post("/v1/chat/completions", chat(R"("logprobs": true, "top_logprobs": 3, "max_tokens": 4)"));
  ASSERT_TRUE(r);
  b = json::parse(r->body);
  const json& lp = b["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const int32_t id = f.backend.script()[i];
    EXPECT_EQ(lp[i]["token"], std::string(f.tok->token_bytes(id)));
    EXPECT_FLOAT_EQ(lp[i]["logprob"].get<float>(), -0.25f * static_cast<float>(i + 1));
    ASSERT_EQ(lp[i]["top_logprobs"].size(), 3u);
    EXPECT_EQ(lp[i]["top_logprobs"][0]["token"], lp[i]["token"]);
    EXPECT_EQ(lp[i]["bytes"].size(), f.tok->token_bytes(id).size());
  }
}

TEST(ServeHttp, Completions) {
  Fixture f;
  auto r = f.post("/v1/completions", R"({"model": "smol", "prompt": [1, 2, 3], "logprobs": 2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json b = json::parse(r->body);
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["choices"][0]["text"], kScript);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  const json& lp = b["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), f.backend.script().size()) << "the EOS that ended it is not text";
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  size_t offset = 0;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], offset) << i;
    offset += lp["tokens"][i].get<std::string>().size();
  }
  const auto seen = f.backend.seen();
  EXPECT_EQ(seen[0].prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(seen[0].max_new, 16) << "OpenAI's default for /v1/completions";
  EXPECT_EQ(seen[0].stop_ids, std::set<int32_t>{f.eos});
}

TEST(ServeHttp, EveryHttpErrorIsOpenAIShaped) {
  ServeOptions o;
  o.max_body_bytes = 4096;
  Fixture f(o);
  expect_error(f.client().Get("/v1/nothing"), 404, "unknown_url");
  expect_error(f.post("/v2/chat", "{}"), 404, "unknown_url");
  auto r = f.client().Get("/v1/chat/completions");
  expect_error(r, 405, "method_not_allowed");
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  expect_error(f.post("/v1/models", "{}"), 405, "method_not_allowed");
  expect_error(f.client().Delete("/v1/completions"), 405, "method_not_allowed");
  expect_error(f.post("/v1/chat/completions", "{\"model\": "), 400, "invalid_json");
  expect_error(f.post("/v1/chat/completions", chat(R"("n": 0)")), 400, "invalid_value");
  expect_error(f.post("/v1/chat/completions", chat(R"("n": 5)")), 400, "invalid_value");  // max_seqs 4
  expect_error(f.post("/v1/chat/completions", chat(R"("max_tokens": 0)")), 400, "invalid_value");
  expect_error(f.post("/v1/chat/completions", chat(R"("max_tokens": 250)")), 400, "context_length_exceeded");
  expect_error(f.post("/v1/chat/completions", chat(R"("max_tokens": 200, "n": 4)")), 400, "kv_cache_exceeded");
  expect_error(f.post("/v1/chat/completions", R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})"),
               404, "model_not_found");
  expect_error(f.post("/v1/completions", R"({"model": "smol", "prompt": ")" + std::string(3000, 'x') + "\"}"), 400,
               "context_length_exceeded");
  expect_error(f.post("/v1/completions", R"({"model": "smol", "prompt": ")" + std::string(5000, 'x') + "\"}"), 413,
               "request_too_large");
  EXPECT_EQ(f.backend.seen().size(), 0u) << "no bad request reached the backend";
}

TEST(ServeHttp, TooManyInFlightIs429) {
  ServeOptions o;
  o.max_concurrency = 1;
  Fixture f(o);
  f.backend.set_delay(std::chrono::milliseconds(20));  // ~0.9 s per request
  std::optional<httplib::Response> slow;
  std::thread t([&] {
    if (auto r = f.post("/v1/chat/completions", chat())) slow = *r;
  });
  for (int i = 0; i < 200 && f.server->in_flight() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(f.server->in_flight(), 1);
  expect_error(f.post("/v1/chat/completions", chat()), 429, "rate_limit_exceeded");
  EXPECT_EQ(json::parse(f.post("/v1/chat/completions", chat())->body)["error"]["type"], "rate_limit_error");
  t.join();
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->status, 200);
  auto r = f.client().Get("/stats");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["in_flight"], 0);
  EXPECT_EQ(f.post("/v1/chat/completions", chat(R"("max_tokens": 1)"))->status, 200) << "the slot is free again";
}

TEST(ServeHttp, StopLetsInFlightRequestsFinish) {
  Fixture f;
  f.backend.set_delay(std::chrono::milliseconds(15));
  std::optional<httplib::Response> plain, streamed;
  std::thread a([&] {
    if (auto r = f.post("/v1/chat/completions", chat())) plain = *r;
  });
  std::thread b([&] {
    if (auto r = f.post("/v1/chat/completions", chat(R"("stream": true)"))) streamed = *r;
  });
  for (int i = 0; i < 400 && f.server->in_flight() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(f.server->in_flight(), 2);
  f.server->stop();
  f.thread.join();  // listen() returns only after both handlers are done
  f.thread = std::thread([] {});
  a.join();
  b.join();
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200);
  EXPECT_EQ(json::parse(plain->body)["choices"][0]["message"]["content"], kScript);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_EQ(sse_events(streamed->body).back(), "[DONE]");
  httplib::Client c("127.0.0.1", f.port);
  c.set_connection_timeout(1, 0);
  EXPECT_FALSE(c.Get("/v1/models")) << "no longer accepting";
}

// A template that shows the tools it gets; the scripted reply is a Hermes-style call.
const char* kToolTemplate =
    "{% if tools %}<|im_start|>system\nTOOLS: {% for t in tools %}{{ t.function.name }} {% endfor %}<|im_end|>\n"
    "{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const char* kCallScript =
    "Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";
const char* kTools =
    R"("tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}])";

TEST(ServeHttp, ToolCallsInTheModelsSyntax) {
  Fixture f({}, kCallScript, kToolTemplate, text::ToolCallFormat::hermes);
  auto r = f.post("/v1/chat/completions", chat(kTools));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json b = json::parse(r->body);
  const json& c = b["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["content"], "Let me add.");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "add");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), (json{{"a", 2}, {"b", 3}}))
      << "arguments: a JSON string, as OpenAI sends them";
  // The template saw the tools.
  const std::string prompt = f.tok->decode(f.backend.seen()[0].prompt);
  EXPECT_NE(prompt.find("TOOLS: add"), std::string::npos) << prompt;

  // Streamed: the reply is parsed at its end, the call in one delta with its index.
  r = f.post("/v1/chat/completions", chat(std::string(kTools) + R"(, "stream": true)"));
  ASSERT_TRUE(r);
  json calls = json::array();
  std::string finish, content;
  for (const json& e : sse_events(r->body))
    if (e.is_object())
      for (const json& ch : e["choices"]) {
        if (ch["delta"].contains("tool_calls")) calls = ch["delta"]["tool_calls"];
        if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
        if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
      }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, "Let me add.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "add");

  // Without tools in the request the reply stays text; tool_choice "none" hides the tools from the template.
  r = f.post("/v1/chat/completions", chat());
  b = json::parse(r->body);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b["choices"][0]["message"]["content"], kCallScript);
  r = f.post("/v1/chat/completions", chat(std::string(kTools) + R"(, "tool_choice": "none")"));
  EXPECT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(f.tok->decode(f.backend.seen().back().prompt).find("TOOLS:"), std::string::npos);
}

TEST(ServeHttp, BackendRefusalIs503) {
  Fixture f;
  f.backend.refuse();
  expect_error(f.post("/v1/chat/completions", chat()), 503, "shutting_down");
}

}  // namespace
}  // namespace temper::serve
