// `temper serve --model M`: an OpenAI-compatible HTTP server (serve/server.h) on the rollout engine
// (serve/engine_backend.h) with continuous batching. M is a Hugging Face directory, a GGUF file, a
// checkpoint directory (checkpoints/step-N) or a run directory (its newest checkpoint). SIGTERM or
// SIGINT stops accepting connections, lets in-flight requests finish and exits 0.
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct ServeCmdOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8000;                // 0: any free port (printed)
  int64_t max_seqs = 64;          // sequences decoding at once (the engine's batch); n <= this
  int64_t max_concurrency = 128;  // generation requests in flight; one more gets 429
  int64_t max_body_bytes = 4 << 20;
  double kv_cache_gib = 2.0;  // KV cache budget (at least one full context)
  std::string device = "cpu";
  std::string chat_template;              // override the model's (chatml, llama3)
  std::string served_model_name;          // default: the model path's last component
  std::string tool_call_format = "auto";  // auto (from the template), hermes, llama3_json, mistral, none
  int threads = 0;
};

int serve(const ServeCmdOptions& o);

}  // namespace temper::app
