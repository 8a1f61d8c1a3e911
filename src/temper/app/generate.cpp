#include "temper/app/generate.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "temper/app/codec.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/settings.h"
#include "temper/core/thread_pool.h"
#include "temper/io/atomic_file.h"
#include "temper/model/int4_drafter.h"
#include "temper/rl/methods/fair.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/sampler.h"
#include "temper/rollout/self_speculation.h"
#include "temper/tasks/task.h"
#include "temper/text/chat_template.h"
#include "temper/text/stream_decoder.h"

namespace temper::app {

namespace {

// --speculative: the model's 4-bit self-drafter, always on; report() prints what it did.
struct Speculation {
  rollout::SelfSpeculation s;
  void attach(const GenerateOptions& o, Transformer& m, KvPool& pool, rollout::RolloutEngine& eng) {
    if (!o.speculative) return;
    s.attach(m, pool, eng, o.gamma, draft_head_named(o.draft_head, "--draft-head"), rollout::SpecToggle::always);
  }
  void report(const rollout::EngineStats& st) const {
    if (s.on()) std::fprintf(stderr, "temper generate: %s\n", s.summary(st).c_str());
  }
};

}  // namespace

namespace {

// Prompt -> token ids (chat template unless raw); adds the template's end-of-turn token to `stop`.
std::vector<int32_t> encode_prompt(const text::Tokenizer& tok, const GenerateOptions& o,
                                   const std::vector<text::ChatMessage>& messages, const std::string& raw_text,
                                   std::set<int32_t>& stop) {
  std::vector<int32_t> ids;
  std::string pref;
  if (!o.preference.empty()) {
    const std::vector<double> w = split_numbers(o.preference, "--preference");
    double sum = 0;
    for (double x : w) sum += x;
    TEMPER_CHECK(w.size() >= 2 && std::fabs(sum - 1) < 1e-6)
        << "--preference: expected at least 2 numbers summing to 1, got '" << o.preference << "'";
    TEMPER_CHECK(o.preference_prefix.find("{p}") != std::string::npos)
        << "--preference-prefix must contain {p}, got '" << o.preference_prefix << "'";
    pref = rl::fair_preference_text(unescape_newlines(o.preference_prefix), w,
                                    o.ggf.empty() ? std::vector<double>{} : split_numbers(o.ggf, "--ggf"));
  }
  if (o.raw) {
    ids = tok.prefix_ids();  // BOS if the tokenizer adds one; never an EOS after the text to continue
    std::vector<int32_t> body = tok.encode(pref + raw_text, /*add_special=*/false);
    ids.insert(ids.end(), body.begin(), body.end());
  } else {
    const text::ChatTemplate tmpl =
        text::chat_template_resolve(o.chat_template, tok.chat_template(), text::chat_tokens(tok));
    std::vector<text::ChatMessage> with = messages;
    for (auto it = with.rbegin(); it != with.rend() && !pref.empty(); ++it)
      if (it->role == "user") {
        it->content = pref + it->content;
        break;
      }
    std::string rendered = tmpl.render(with, /*add_generation_prompt=*/true);
    ids = tok.encode(rendered, /*add_special=*/false);
    const int32_t eot = tmpl.end_of_turn().empty() ? -1 : tok.token_to_id(tmpl.end_of_turn());
    if (eot >= 0) stop.insert(eot);
  }
  TEMPER_CHECK(!ids.empty()) << "a prompt encodes to no tokens";
  return ids;
}

int generate_jsonl(const GenerateOptions& o, LoadedModel& lm, const rollout::SamplerConfig& sc) {
  const text::Tokenizer& tok = *lm.tokenizer;
  std::ifstream in(o.prompts_file);
  TEMPER_CHECK(in.good()) << o.prompts_file << ": cannot open";
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<std::string> line_text;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      TEMPER_FAIL() << o.prompts_file << ":" << lineno << ": not valid JSON: " << e.what();
    }
    std::vector<text::ChatMessage> msgs;
    std::string raw;
    if (j.contains("messages")) {
      TEMPER_CHECK(j["messages"].is_array()) << o.prompts_file << ":" << lineno << ": 'messages' must be a list";
      for (auto& m : j["messages"]) {
        TEMPER_CHECK(m.is_object() && m.value("role", "") != "" && m.contains("content") && m["content"].is_string())
            << o.prompts_file << ":" << lineno << ": each message needs 'role' and a string 'content'";
        msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
      }
    } else {
      TEMPER_CHECK(j.contains("prompt") && j["prompt"].is_string())
          << o.prompts_file << ":" << lineno << ": expected a string 'prompt' or a 'messages' list";
      raw = j["prompt"].get<std::string>();
      if (!o.system.empty()) msgs.push_back({"system", o.system});
      msgs.push_back({"user", raw});
    }
    rollout::RolloutRequest r;
    r.stop_ids.insert(lm.eos_ids.begin(), lm.eos_ids.end());
    if (tok.eos_id() >= 0) r.stop_ids.insert(tok.eos_id());
    r.prompt = encode_prompt(tok, o, msgs, raw, r.stop_ids);
    r.group_size = o.samples;
    r.max_new = o.max_new;
    r.sampler = sc;
    r.seed = o.seed;
    r.stop_strings = o.stop;
    r.stream = static_cast<uint64_t>(reqs.size()) * static_cast<uint64_t>(o.samples);
    reqs.push_back(std::move(r));
    line_text.push_back(line);
  }
  TEMPER_CHECK(!reqs.empty()) << o.prompts_file << ": no prompts";
  const ModelConfig& c = lm.model->config();
  int64_t tokens = 0;
  for (auto& r : reqs) tokens += static_cast<int64_t>(r.prompt.size()) + r.max_new;
  const int64_t block = kKvBlockSize;
  KvPool pool(c, block, (tokens * o.samples) / block + 2 * static_cast<int64_t>(reqs.size()) * (o.samples + 1) + 8,
              kv_dtype(lm.model->precision()));
  rollout::RolloutEngine eng(*lm.model, pool,
                             rollout::EngineConfig{64, [&tok](int32_t id) { return tok.token_bytes(id); }});
  Speculation spec;
  spec.attach(o, *lm.model, pool, eng);
  auto t0 = std::chrono::steady_clock::now();
  auto done = eng.run(reqs);
  spec.report(eng.stats());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string outtext;
  int64_t generated = 0;
  for (const auto& cpl : done) {
    nlohmann::json r = {{"index", cpl.request},
                        {"sample", cpl.member},
                        {"text", tok.decode(cpl.tokens, /*skip_special=*/true)},
                        {"token_ids", cpl.tokens},
                        {"logprobs", cpl.policy_logprob},
                        {"sample_logprobs", cpl.sample_logprob},
                        {"entropies", cpl.entropy},
                        {"finish_reason", rollout::finish_reason_name(cpl.finish)}};
    outtext += r.dump() + "\n";
    generated += static_cast<int64_t>(cpl.tokens.size());
  }
  if (o.out.empty()) {
    std::fwrite(outtext.data(), 1, outtext.size(), stdout);
  } else {
    io::write_text_atomic(o.out, outtext);
  }
  std::fprintf(stderr, "temper generate: %zu prompts x %lld samples, %lld tokens in %.2f s (%.1f tokens/s)\n",
               reqs.size(), static_cast<long long>(o.samples), static_cast<long long>(generated), secs,
               generated / (secs > 0 ? secs : 1e-9));
  return 0;
}

}  // namespace

int generate(const GenerateOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  TEMPER_CHECK(o.max_new > 0) << "--max-new must be > 0, got " << o.max_new;
  rollout::SamplerConfig sc;
  sc.greedy = o.greedy;
  sc.temperature = o.temperature;
  sc.top_p = o.top_p;
  sc.top_k = o.top_k;
  sc.min_p = o.min_p;
  sc.repetition_penalty = o.repetition_penalty;
  sc.presence_penalty = o.presence_penalty;
  sc.frequency_penalty = o.frequency_penalty;
  sc.penalty_last_n = o.penalty_last_n;
  sc.validate();

  TEMPER_CHECK(o.samples > 0) << "-n must be > 0, got " << o.samples;
  TEMPER_CHECK(o.prompt.empty() != o.prompts_file.empty()) << "give exactly one of --prompt and --prompts";
  LoadedModel lm = load_model(o.model);
  attach_device(*lm.model, o.device);
  TEMPER_CHECK(lm.tokenizer != nullptr) << o.model << ": has no tokenizer; temper generate needs one";
  if (!o.prompts_file.empty()) return generate_jsonl(o, lm, sc);
  TEMPER_CHECK(o.samples == 1) << "-n applies to --prompts (JSONL); for one prompt run generate again with --seed";
  const text::Tokenizer& tok = *lm.tokenizer;
  Transformer& m = *lm.model;

  std::set<int32_t> stop(lm.eos_ids.begin(), lm.eos_ids.end());
  if (tok.eos_id() >= 0) stop.insert(tok.eos_id());
  std::vector<text::ChatMessage> msgs;
  if (!o.system.empty()) msgs.push_back({"system", o.system});
  msgs.push_back({"user", o.prompt});
  std::vector<int32_t> ids = encode_prompt(tok, o, msgs, o.prompt, stop);
  const ModelConfig& cfg = m.config();
  TEMPER_CHECK(static_cast<int64_t>(ids.size()) < cfg.max_position_embeddings)
      << "prompt of " << ids.size() << " tokens does not fit the model's context of " << cfg.max_position_embeddings;
  std::fprintf(stderr, "temper generate: %s (%s, %.1fM params) loaded in %.2f s; prompt %zu tokens\n", o.model.c_str(),
               lm.format.c_str(), m.num_params() / 1e6, lm.load_seconds, ids.size());
  rollout::RolloutRequest req;
  req.prompt = ids;
  req.max_new = std::min<int64_t>(o.max_new, cfg.max_position_embeddings - static_cast<int64_t>(ids.size()));
  req.sampler = sc;
  req.stop_ids = stop;
  req.seed = o.seed;
  req.stop_strings = o.stop;
  // The same engine as batched rollouts, one sequence; a hook streams each token as it comes.
  struct Stream : rollout::RolloutHook {
    text::StreamDecoder dec;
    std::chrono::steady_clock::time_point first{};
    explicit Stream(const text::Tokenizer& t) : dec(t, /*skip_special=*/true) {}
    rollout::HookDecision after_token(const rollout::RolloutRequest&, const rollout::Completion& c) override {
      if (c.tokens.size() == 1) first = std::chrono::steady_clock::now();
      std::string piece = dec.push(c.tokens.back());
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return {};
    }
  } stream(tok);
  const int64_t block = kKvBlockSize;
  KvPool pool(cfg, block, (static_cast<int64_t>(ids.size()) + req.max_new) / block + 2, kv_dtype(m.precision()));
  rollout::RolloutEngine eng(m, pool, rollout::EngineConfig{1, [&tok](int32_t id) { return tok.token_bytes(id); }});
  Speculation spec;
  spec.attach(o, m, pool, eng);
  auto t0 = std::chrono::steady_clock::now();
  rollout::Completion c = eng.run({req}, &stream).front();
  auto t2 = std::chrono::steady_clock::now();
  spec.report(eng.stats());
  std::string rest = stream.dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  int64_t produced = static_cast<int64_t>(c.tokens.size()) - (c.finish == rollout::FinishReason::stop ? 1 : 0);
  if (stream.first == std::chrono::steady_clock::time_point{})
    stream.first = t2;  // no token reached the hook (an immediate stop)
  double ttft = std::chrono::duration<double>(stream.first - t0).count();
  double decode = std::chrono::duration<double>(t2 - stream.first).count();
  std::fprintf(stderr,
               "temper generate: %lld tokens (%s); first token after %.3f s (prompt %.0f tokens/s), "
               "decode %.1f tokens/s\n",
               static_cast<long long>(produced), rollout::finish_reason_name(c.finish).c_str(), ttft,
               ids.size() / (ttft > 0 ? ttft : 1e-9),
               produced > 0 ? static_cast<double>(c.tokens.size() - 1) / (decode > 0 ? decode : 1e-9) : 0.0);
  return 0;
}

}  // namespace temper::app
