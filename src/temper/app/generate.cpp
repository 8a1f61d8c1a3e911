#include "temper/app/generate.h"

#include <chrono>
#include <cstdio>
#include <set>

#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/model/kv_cache.h"
#include "temper/rollout/sampler.h"
#include "temper/text/chat_template.h"
#include "temper/text/stream_decoder.h"

namespace temper::app {

int generate(const GenerateOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  TEMPER_CHECK(o.max_new > 0) << "--max-new must be > 0, got " << o.max_new;
  rollout::SamplerConfig sc;
  sc.greedy = o.greedy;
  sc.temperature = o.temperature;
  sc.top_p = o.top_p;
  sc.top_k = o.top_k;
  sc.min_p = o.min_p;
  rollout::Sampler sampler(sc);

  LoadedModel lm = load_model(o.model);
  TEMPER_CHECK(lm.tokenizer != nullptr) << o.model << ": has no tokenizer; temper generate needs one";
  const text::Tokenizer& tok = *lm.tokenizer;
  Transformer& m = *lm.model;

  std::vector<int32_t> ids;
  std::set<int32_t> stop(lm.eos_ids.begin(), lm.eos_ids.end());
  if (tok.eos_id() >= 0) stop.insert(tok.eos_id());
  if (o.raw) {
    ids = tok.prefix_ids();  // BOS if the tokenizer adds one; never an EOS after the text to continue
    std::vector<int32_t> body = tok.encode(o.prompt, /*add_special=*/false);
    ids.insert(ids.end(), body.begin(), body.end());
  } else {
    std::string bos = tok.bos_id() >= 0 ? tok.id_to_token(tok.bos_id()) : "";
    text::ChatTemplate tmpl = text::chat_template_resolve(o.chat_template, tok.chat_template(), bos);
    std::vector<text::ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", o.prompt});
    std::string rendered = text::chat_template_render(tmpl, msgs, /*add_generation_prompt=*/true);
    ids = tok.encode(rendered, /*add_special=*/false);
    const char* end_of_turn = tmpl.format == text::ChatFormat::kChatML ? "<|im_end|>" : "<|eot_id|>";
    int32_t eot = tok.token_to_id(end_of_turn);
    if (eot >= 0) stop.insert(eot);
  }
  TEMPER_CHECK(!ids.empty()) << "the prompt encodes to no tokens";
  const ModelConfig& cfg = m.config();
  int64_t max_len = static_cast<int64_t>(ids.size()) + o.max_new;
  TEMPER_CHECK(static_cast<int64_t>(ids.size()) < cfg.max_position_embeddings)
      << "prompt of " << ids.size() << " tokens does not fit the model's context of " << cfg.max_position_embeddings;
  if (max_len > cfg.max_position_embeddings) max_len = cfg.max_position_embeddings;
  std::fprintf(stderr, "temper generate: %s (%s, %.1fM params) loaded in %.2f s; prompt %zu tokens\n",
               o.model.c_str(), lm.format.c_str(), m.num_params() / 1e6, lm.load_seconds, ids.size());

  KvCache cache;
  cache.reset(cfg, max_len);
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  Rng rng(o.seed, 0);
  text::StreamDecoder dec(tok, /*skip_special=*/true);
  auto t0 = std::chrono::steady_clock::now();
  m.forward_cached(ids.data(), static_cast<int64_t>(ids.size()), cache, logits.data());
  auto t1 = std::chrono::steady_clock::now();
  int64_t produced = 0;
  const char* reason = "length";
  while (true) {
    rollout::Sample s = sampler.sample(logits.data(), cfg.vocab_size, rng);
    if (stop.count(s.token)) {
      reason = "stop token";
      break;
    }
    std::string piece = dec.push(s.token);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    ++produced;
    if (produced >= o.max_new || cache.len >= cache.max_len) break;
    m.forward_cached(&s.token, 1, cache, logits.data());
  }
  std::string rest = dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  auto t2 = std::chrono::steady_clock::now();
  double prefill = std::chrono::duration<double>(t1 - t0).count(), decode = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "temper generate: %lld tokens (%s); prefill %.0f tokens/s, decode %.1f tokens/s\n",
               static_cast<long long>(produced), reason, ids.size() / prefill, produced / (decode > 0 ? decode : 1e-9));
  return 0;
}

}  // namespace temper::app
