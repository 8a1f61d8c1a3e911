#include "temper/serve/server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/model/kv_pool.h"
#include "temper/serve/sample_text.h"

namespace temper::serve {

namespace {

using ojson = nlohmann::ordered_json;

uint64_t random_u64() {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> l(mu);
  return gen();
}

std::string random_id(const char* prefix) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix, static_cast<unsigned long long>(random_u64()),
                static_cast<unsigned long long>(random_u64() & 0xffffffffULL));
  return buf;
}

void send_json(httplib::Response& res, int status, const ojson& j) {
  res.status = status;
  res.set_content(dump_json(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(dump_json(e.body()), "application/json");
}

std::string sse(const ojson& j) {
  return "data: " + dump_json(j) + "\n\n";
}

const char* finish_name(rollout::FinishReason f) {
  return f == rollout::FinishReason::length ? "length" : "stop";  // hook: a cancelled request, reported as stop
}

constexpr int64_t kTopLogprobsBytes = int64_t{1} << 30;

// Route table: path pattern -> the one method it takes. 404 for other paths, 405 for other methods.
struct Route {
  std::regex path;
  const char* method;
};

}  // namespace

struct Server::Impl {
  ServeOptions opts;
  ServedModel model;
  Backend& backend;
  Server& owner;
  ServeLimits limits;
  std::time_t created = std::time(nullptr);
  httplib::Server http;
  std::vector<Route> routes;
  std::atomic<bool> stopping{false}, listening{false};

  Impl(ServeOptions o, ServedModel m, Backend& b, Server& s)
      : opts(std::move(o)), model(std::move(m)), backend(b), owner(s) {
    limits.model = model.name;
    limits.context = model.context;
    limits.vocab = model.vocab;
    limits.max_n = model.max_seqs;
    setup();
  }

  // One generation request in flight: counted from its start to its last byte (a stream's end).
  std::shared_ptr<void> acquire_slot() {
    if (stopping) throw ApiError(503, "the server is stopping", "", "server_stopping");
    const int64_t now = owner.in_flight_.fetch_add(1) + 1;
    std::shared_ptr<void> slot(nullptr, [this](void*) { owner.in_flight_.fetch_sub(1); });
    if (now > opts.max_concurrency)
      throw ApiError(
          429,
          "too many requests in flight (" + std::to_string(opts.max_concurrency) + ", --max-concurrency); retry later",
          "", "rate_limit_exceeded");
    return slot;
  }

  void setup();
  void models(const httplib::Request& req, httplib::Response& res);
  void chat(const httplib::Request& req, httplib::Response& res);
  void completions(const httplib::Request& req, httplib::Response& res);
  void generate(std::vector<int32_t> prompt, const Sampling& s, bool chat, const ojson& tools,
                std::shared_ptr<void> slot, httplib::Response& res, const std::string& client);
  void unrouted(const httplib::Request& req, httplib::Response& res);
};

// Everything one generation request needs from queueing to its last chunk.
struct Exchange {
  const ServedModel* sm = nullptr;
  bool chat = true;
  bool tools = false;  // the request had tools and the model parses calls: a chat reply is buffered and parsed
  std::string id, model;
  std::time_t created = 0;
  Sampling s;
  int64_t prompt_tokens = 0;
  std::shared_ptr<GenJob> job;
  std::shared_ptr<void> slot;
  struct Member {
    std::unique_ptr<SampleText> text;
    std::string content;   // all text so far
    int64_t streamed = 0;  // tokens seen through token events
    bool done = false;
    GenEvent final;  // the done event
  };
  std::vector<Member> members;
  int64_t members_left = 0;
  int64_t completion_tokens = 0;
  bool header_sent = false, finished = false;

  const text::Tokenizer& tok() const { return *sm->tokenizer; }

  // Tokens of a final sample the client sees: a stop id that ended it is not text.
  size_t visible(const GenEvent& d) const {
    const bool by_id = d.finish == rollout::FinishReason::stop && d.stop_string < 0 && !d.tokens.empty() &&
                       job->request.stop_ids.count(d.tokens.back());
    return d.tokens.size() - (by_id ? 1 : 0);
  }

  ojson token_entry(int32_t id, float lp) const {
    const std::string_view b = tok().token_bytes(id);
    ojson bytes = ojson::array();
    for (unsigned char c : b) bytes.push_back(static_cast<int>(c));
    return {{"token", std::string(b)}, {"logprob", lp}, {"bytes", bytes}};
  }

  // Chat logprobs for tokens [from, to) of a sample (tokens/logprobs/top as the events carry them).
  ojson chat_logprobs(const std::vector<int32_t>& toks, const std::vector<float>& lps,
                      const std::vector<TopLogprobs>& top, size_t from, size_t to) const {
    ojson content = ojson::array();
    for (size_t i = from; i < to; ++i) {
      ojson e = token_entry(toks[i], lps[i]);
      ojson tl = ojson::array();
      if (i < top.size())
        for (const auto& [t, lp] : top[i]) tl.push_back(token_entry(t, lp));
      e["top_logprobs"] = std::move(tl);
      content.push_back(std::move(e));
    }
    return {{"content", std::move(content)}};
  }

  // Legacy completions logprobs: tokens, token_logprobs, top_logprobs (token text -> log-prob), text_offset.
  ojson completion_logprobs(const std::vector<int32_t>& toks, const std::vector<float>& lps,
                            const std::vector<TopLogprobs>& top, const std::vector<size_t>& offsets, size_t from,
                            size_t to) const {
    ojson t = ojson::array(), l = ojson::array(), tl = ojson::array(), off = ojson::array();
    for (size_t i = from; i < to; ++i) {
      t.push_back(std::string(tok().token_bytes(toks[i])));
      l.push_back(lps[i]);
      ojson m = ojson::object();
      if (i < top.size())
        for (const auto& [id, lp] : top[i]) m[std::string(tok().token_bytes(id))] = lp;
      tl.push_back(std::move(m));
      off.push_back(i < offsets.size() ? offsets[i] : 0);
    }
    ojson r = {{"tokens", t}, {"token_logprobs", l}, {"top_logprobs", nullptr}, {"text_offset", off}};
    if (s.top_logprobs > 0) r["top_logprobs"] = std::move(tl);
    return r;
  }

  ojson usage() const {
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  }

  ojson chunk(ojson choices) const {
    return {{"id", id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", std::move(choices)}};
  }

  // The whole reply of a final sample (non-streaming), as a choice object.
  ojson full_choice(int64_t m) {
    Member& mb = members[static_cast<size_t>(m)];
    const GenEvent& d = mb.final;
    const size_t n = visible(d);
    std::string text;
    std::vector<size_t> offsets;
    for (size_t i = 0; i < n; ++i) {
      offsets.push_back(mb.text->emitted());
      text += mb.text->push(d.tokens[i]);
    }
    text += mb.text->finish();
    std::string finish = finish_name(d.finish);
    if (chat) {
      ojson msg = {{"role", "assistant"}, {"content", text}};
      if (tools) {
        ParsedReply p = sm->parse_tool_calls(text);
        if (!p.tool_calls.empty()) {
          msg["content"] = p.content.empty() ? ojson(nullptr) : ojson(p.content);
          msg["tool_calls"] = p.tool_calls;
          finish = "tool_calls";
        }
      }
      return {{"index", m},
              {"message", msg},
              {"logprobs", s.logprobs ? chat_logprobs(d.tokens, d.logprobs, d.top, 0, n) : ojson(nullptr)},
              {"finish_reason", finish}};
    }
    return {{"index", m},
            {"text", text},
            {"logprobs", s.logprobs ? completion_logprobs(d.tokens, d.logprobs, d.top, offsets, 0, n) : ojson(nullptr)},
            {"finish_reason", finish}};
  }

  // Waits for every sample (non-streaming). An engine failure is a 500.
  ojson wait_all() {
    while (members_left > 0) {
      GenEvent e;
      if (!job->pop(e, std::chrono::milliseconds(200))) continue;
      if (e.kind == GenEvent::Kind::error) throw ApiError(500, "generation failed: " + e.error, "", "engine_error");
      if (e.kind != GenEvent::Kind::done) continue;
      completion_tokens += static_cast<int64_t>(e.tokens.size());
      Member& mb = members[static_cast<size_t>(e.member)];
      mb.final = std::move(e);
      mb.done = true;
      --members_left;
    }
    ojson choices = ojson::array();
    for (int64_t m = 0; m < static_cast<int64_t>(members.size()); ++m) choices.push_back(full_choice(m));
    return {{"id", id},
            {"object", chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", std::move(choices)},
            {"usage", usage()}};
  }

  // One streamed token of a sample: a chunk with its text (maybe empty while held back) and log-prob.
  std::string stream_token(const GenEvent& e) {
    Member& mb = members[static_cast<size_t>(e.member)];
    ++mb.streamed;
    const size_t offset = mb.text->emitted();
    const std::string piece = mb.text->push(e.token);
    mb.content += piece;
    if (piece.empty() && !s.logprobs) return {};
    const std::vector<int32_t> t{e.token};
    const std::vector<float> l{e.logprob};
    return sse(chunk(ojson::array({choice_delta(e.member, piece, t, l, {}, {offset}, nullptr)})));
  }

  ojson choice_delta(int64_t m, const std::string& piece, const std::vector<int32_t>& toks,
                     const std::vector<float>& lps, const std::vector<TopLogprobs>& top,
                     const std::vector<size_t>& offsets, const char* finish) const {
    ojson lp = nullptr;
    if (s.logprobs && !toks.empty())
      lp = chat ? chat_logprobs(toks, lps, top, 0, toks.size())
                : completion_logprobs(toks, lps, top, offsets, 0, toks.size());
    ojson c;
    if (chat) {
      c = {{"index", m}, {"delta", ojson::object()}, {"logprobs", lp}, {"finish_reason", nullptr}};
      if (!piece.empty()) c["delta"]["content"] = piece;
    } else {
      c = {{"index", m}, {"text", piece}, {"logprobs", lp}, {"finish_reason", nullptr}};
    }
    if (finish) c["finish_reason"] = finish;
    return c;
  }

  // A sample's end in a stream: the tokens no token event carried (the stop token, or all of them when
  // streaming was buffered), the held-back text, the finish reason.
  std::string stream_done(GenEvent e) {
    completion_tokens += static_cast<int64_t>(e.tokens.size());
    Member& mb = members[static_cast<size_t>(e.member)];
    const size_t n = visible(e);
    std::string piece;
    std::vector<int32_t> toks;
    std::vector<float> lps;
    std::vector<TopLogprobs> top;
    std::vector<size_t> offsets;
    for (size_t i = static_cast<size_t>(mb.streamed); i < n; ++i) {
      offsets.push_back(mb.text->emitted());
      piece += mb.text->push(e.tokens[i]);
      toks.push_back(e.tokens[i]);
      lps.push_back(e.logprobs[i]);
      if (i < e.top.size()) top.push_back(e.top[i]);
    }
    piece += mb.text->finish();
    mb.content += piece;
    std::string finish = finish_name(e.finish);
    if (chat && tools) {
      ParsedReply p = sm->parse_tool_calls(mb.content);
      if (!p.tool_calls.empty()) {
        ojson delta = ojson::object();
        if (!p.content.empty()) delta["content"] = p.content;
        ojson calls = ojson::array();
        for (size_t i = 0; i < p.tool_calls.size(); ++i) {
          ojson c = p.tool_calls[i];
          c["index"] = static_cast<int64_t>(i);
          calls.push_back(std::move(c));
        }
        delta["tool_calls"] = std::move(calls);
        ojson lp = s.logprobs ? chat_logprobs(toks, lps, top, 0, toks.size()) : ojson(nullptr);
        mb.done = true;
        return sse(chunk(ojson::array(
            {{{"index", e.member}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", "tool_calls"}}})));
      }
    }
    mb.done = true;
    return sse(chunk(ojson::array({choice_delta(e.member, piece, toks, lps, top, offsets, finish.c_str())})));
  }

  // The stream's opening: the assistant role of every choice (chat).
  std::string stream_header() {
    std::string out;
    if (!chat) return out;
    for (int64_t m = 0; m < static_cast<int64_t>(members.size()); ++m)
      out += sse(chunk(ojson::array({{{"index", m},
                                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                                      {"logprobs", nullptr},
                                      {"finish_reason", nullptr}}})));
    return out;
  }

  // The next piece of the stream (waits up to `wait` for an event); "" when nothing came.
  std::string stream_next(std::chrono::milliseconds wait) {
    if (!header_sent) {
      header_sent = true;
      return stream_header();
    }
    GenEvent e;
    if (!job->pop(e, wait)) return {};
    switch (e.kind) {
      case GenEvent::Kind::token:
        return stream_token(e);
      case GenEvent::Kind::error: {
        finished = true;
        return sse(ApiError(500, "generation failed: " + e.error, "", "engine_error").body()) + "data: [DONE]\n\n";
      }
      case GenEvent::Kind::done: {
        std::string out = stream_done(std::move(e));
        if (--members_left == 0) {
          finished = true;
          if (s.include_usage) {
            ojson u = chunk(ojson::array());
            u["usage"] = usage();
            out += sse(u);
          }
          out += "data: [DONE]\n\n";
        }
        return out;
      }
    }
    return {};
  }
};

std::function<ParsedReply(const std::string&)> tool_call_parser(text::ToolCallFormat format) {
  if (format == text::ToolCallFormat::none) return {};
  return [format](const std::string& reply) {
    const text::ParsedTurn turn = text::parse_tool_calls(reply, format);
    ParsedReply r;
    if (turn.calls.empty()) {
      r.content = reply;
      return r;
    }
    r.content = turn.content;
    for (const text::ToolCall& c : turn.calls)
      r.tool_calls.push_back({{"id", format == text::ToolCallFormat::mistral ? c.id : random_id("call_")},
                              {"type", "function"},
                              {"function", {{"name", c.name}, {"arguments", dump_json(c.arguments)}}}});
    return r;
  };
}

void Server::Impl::setup() {
  http.new_task_queue = [n = opts.max_concurrency + 16] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  http.set_payload_max_length(static_cast<size_t>(opts.max_body_bytes));
  http.set_keep_alive_max_count(1000);
  http.set_tcp_nodelay(true);
  // Errors httplib answers itself (413 over --max-body-bytes, 400 a request it cannot parse) get OpenAI's shape.
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int st = res.status;
    std::string msg = st == 413   ? "the request body is larger than this server accepts (--max-body-bytes)"
                      : st == 414 ? "the request URI is too long"
                                  : "the request could not be handled (HTTP " + std::to_string(st) + ")";
    send_error(res, ApiError(st, msg, "", st == 413 ? "request_too_large" : ""));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "internal_error"));
    } catch (...) {
      send_error(res, ApiError(500, "internal error", "", "internal_error"));
    }
  });
  auto guard = [this](void (Impl::*fn)(const httplib::Request&, httplib::Response&)) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*fn)(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        TEMPER_LOG(error) << "temper serve: " << req.method << " " << req.path << ": " << e.what();
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "internal_error"));
      }
    };
  };
  routes = {{std::regex("/v1/models"), "GET"},
            {std::regex("/v1/models/.+"), "GET"},
            {std::regex("/v1/chat/completions"), "POST"},
            {std::regex("/v1/completions"), "POST"},
            {std::regex("/health"), "GET"},
            {std::regex("/stats"), "GET"}};
  http.Get(R"(/v1/models(/.+)?)", guard(&Impl::models));
  http.Post("/v1/chat/completions", guard(&Impl::chat));
  http.Post("/v1/completions", guard(&Impl::completions));
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });
  http.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"engine_steps", backend.steps()},
               {"in_flight", owner.in_flight()},
               {"served", owner.served()},
               {"max_concurrency", opts.max_concurrency}});
  });
  const httplib::Server::Handler other = guard(&Impl::unrouted);
  http.Get(".*", other);
  http.Post(".*", other);
  http.Put(".*", other);
  http.Patch(".*", other);
  http.Delete(".*", other);
  http.Options(".*", other);
}

// The API key an OpenAI client sends ("Authorization: Bearer KEY"); empty when none.
static std::string bearer_token(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  return h.rfind("Bearer ", 0) == 0 ? h.substr(7) : std::string();
}

void Server::Impl::unrouted(const httplib::Request& req, httplib::Response& res) {
  for (const Route& r : routes)
    if (std::regex_match(req.path, r.path)) {
      res.set_header("Allow", r.method);
      throw ApiError(405, "Method " + req.method + " is not allowed for " + req.path + " (use " + r.method + ")", "",
                     "method_not_allowed");
    }
  throw ApiError(404, "Invalid URL (" + req.method + " " + req.path + ")", "", "unknown_url");
}

void Server::Impl::models(const httplib::Request& req, httplib::Response& res) {
  const ojson card = {{"id", model.name},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "temper"},
                      {"max_model_len", model.context}};
  const std::string prefix = "/v1/models/";
  if (req.path.size() > prefix.size()) {
    const std::string name = req.path.substr(prefix.size());
    if (name != model.name)
      throw ApiError(404, "The model `" + name + "` does not exist (this server serves `" + model.name + "`)", "model",
                     "model_not_found");
    return send_json(res, 200, card);
  }
  send_json(res, 200, {{"object", "list"}, {"data", ojson::array({card})}});
}

void Server::Impl::chat(const httplib::Request& req, httplib::Response& res) {
  std::shared_ptr<void> slot = acquire_slot();
  ChatRequest cr = parse_chat_request(req.body, limits);
  if (!model.chat_template)
    throw ApiError(400,
                   "this model has no chat template: use /v1/completions, or start the server with --chat-template",
                   "messages", "no_chat_template");
  text::ChatRenderOptions ro;
  ro.add_generation_prompt = true;
  ro.tools = cr.tools;
  std::string rendered;
  try {
    rendered = model.chat_template->render(cr.messages, ro);
  } catch (const temper::Error& e) {
    throw ApiError(400, std::string("the chat template cannot render these messages: ") + e.what(), "messages",
                   "template_error");
  }
  std::vector<int32_t> ids = model.tokenizer->encode(rendered, /*add_special=*/false);
  generate(std::move(ids), cr.s, /*chat=*/true, cr.tools, std::move(slot), res, bearer_token(req));
}

void Server::Impl::completions(const httplib::Request& req, httplib::Response& res) {
  std::shared_ptr<void> slot = acquire_slot();
  CompletionRequest cr = parse_completion_request(req.body, limits);
  std::vector<int32_t> ids;
  if (cr.prompt_is_ids) {
    ids = std::move(cr.prompt_ids);
  } else {
    ids = model.tokenizer->prefix_ids();  // BOS when the tokenizer adds one, never an EOS after the text
    std::vector<int32_t> body = model.tokenizer->encode(cr.prompt, /*add_special=*/false);
    ids.insert(ids.end(), body.begin(), body.end());
  }
  generate(std::move(ids), cr.s, /*chat=*/false, nullptr, std::move(slot), res, bearer_token(req));
}

void Server::Impl::generate(std::vector<int32_t> prompt, const Sampling& s, bool chat, const ojson& tools,
                            std::shared_ptr<void> slot, httplib::Response& res, const std::string& client) {
  if (prompt.empty())
    throw ApiError(400, "the prompt encodes to no tokens", chat ? "messages" : "prompt", "invalid_value");
  const int64_t P = static_cast<int64_t>(prompt.size());
  const int64_t max_new = resolve_max_new(s, P, limits, chat ? 0 : opts.completions_default_max_tokens);
  // A request the KV cache cannot hold at all would fail the engine's run (and every request in it).
  if (model.kv_tokens > 0 && P + s.n * (max_new + kKvBlockSize) > model.kv_tokens)
    throw ApiError(400,
                   "the prompt (" + std::to_string(P) + " tokens) and n = " + std::to_string(s.n) + " completions of " +
                       std::to_string(max_new) + " tokens do not fit this server's KV cache of " +
                       std::to_string(model.kv_tokens) + " tokens; lower n or max_tokens",
                   "max_tokens", "kv_cache_exceeded");
  // top_logprobs: one forward over prompt + completion keeps its [T, V] logits.
  if (s.logprobs && s.top_logprobs > 0 && (P + max_new) * model.vocab * 4 > kTopLogprobsBytes)
    throw ApiError(400,
                   "top_logprobs over " + std::to_string(P + max_new) + " tokens would need " +
                       std::to_string((P + max_new) * model.vocab * 4 >> 20) + " MiB of logits (at most " +
                       std::to_string(kTopLogprobsBytes >> 20) + "); lower max_tokens or leave top_logprobs out",
                   "top_logprobs", "invalid_value");

  auto job = std::make_shared<GenJob>();
  rollout::RolloutRequest& r = job->request;
  r.prompt = std::move(prompt);
  r.group_size = s.n;
  r.max_new = max_new;
  r.sampler = s.sampler;
  r.stop_ids = model.eos_ids;
  if (chat && model.end_of_turn >= 0) r.stop_ids.insert(model.end_of_turn);
  r.stop_strings = s.stop;
  r.seed = s.seed ? *s.seed : random_u64();
  r.stream = 0;
  job->top_logprobs = s.logprobs ? s.top_logprobs : 0;
  job->client = client;

  auto ex = std::make_shared<Exchange>();
  ex->sm = &model;
  ex->chat = chat;
  ex->tools = chat && !tools.is_null() && static_cast<bool>(model.parse_tool_calls);
  ex->id = random_id(chat ? "chatcmpl-" : "cmpl-");
  ex->model = model.name;
  ex->created = std::time(nullptr);
  ex->s = s;
  ex->prompt_tokens = P;
  ex->job = job;
  ex->members.resize(static_cast<size_t>(s.n));
  for (auto& m : ex->members) m.text = std::make_unique<SampleText>(*model.tokenizer, s.stop);
  ex->members_left = s.n;
  // A streamed reply with tools is parsed whole at the end: no token events for it.
  job->stream = s.stream && !ex->tools;

  backend.submit(job);
  owner.served_.fetch_add(1);
  if (!s.stream) {
    const ojson body = ex->wait_all();
    return send_json(res, 200, body);
  }
  ex->slot = std::move(slot);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [ex](size_t /*offset*/, httplib::DataSink& sink) {
        while (!ex->finished) {
          if (!sink.is_writable()) return false;
          const std::string out = ex->stream_next(std::chrono::milliseconds(100));
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        }
        sink.done();
        return true;
      },
      [ex](bool success) {
        if (!success || !ex->finished) ex->job->cancel();  // the client went away: stop its samples
        ex->slot.reset();
      });
}

Server::Server(ServeOptions opts, ServedModel model, Backend& backend) {
  TEMPER_CHECK(model.tokenizer != nullptr) << "temper serve: the model has no tokenizer";
  TEMPER_CHECK(opts.max_concurrency >= 1) << "--max-concurrency must be >= 1, got " << opts.max_concurrency;
  TEMPER_CHECK(opts.max_body_bytes >= 1024) << "--max-body-bytes must be >= 1024, got " << opts.max_body_bytes;
  impl_ = std::make_unique<Impl>(std::move(opts), std::move(model), backend, *this);
}

Server::~Server() = default;

int Server::bind() {
  Impl& s = *impl_;
  int port = s.opts.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opts.host);
    TEMPER_CHECK(port > 0) << "temper serve: cannot bind a port on " << s.opts.host;
  } else {
    TEMPER_CHECK(s.http.bind_to_port(s.opts.host, port))
        << "temper serve: cannot listen on " << s.opts.host << ":" << port << " (in use, or not an address here?)";
  }
  return port;
}

void Server::listen() {
  Impl& s = *impl_;
  if (s.stopping) return;
  s.listening = true;
  s.http.listen_after_bind();
  s.listening = false;
}

void Server::stop() {
  Impl& s = *impl_;
  s.stopping = true;
  // A stop that comes while listen() is starting waits for it to run, so it is not missed.
  for (int i = 0; i < 200 && s.listening && !s.http.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Requests in flight finish first (new ones get 503 meanwhile): httplib's stop cuts a streamed reply that has not
  // yet been written out. At most 30 s: a client that stopped reading does not hold the stop for ever.
  for (int i = 0; i < 6000 && in_flight_ > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  s.http.stop();
}

}  // namespace temper::serve
