#include "temper/app/serve_cmd.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "temper/core/error.h"
#include "temper/core/stop_signals.h"

#if TEMPER_WITH_SERVE
#include "temper/app/checkpoint.h"
#include "temper/app/model_source.h"
#include "temper/app/served_model.h"
#include "temper/core/thread_pool.h"
#include "temper/io/hf_model_dir.h"
#include "temper/rollout/engine.h"
#include "temper/serve/engine_backend.h"
#include "temper/serve/server.h"
#include "temper/text/chat_template.h"
#include "temper/text/tool_calls.h"
#endif

namespace temper::app {

namespace fs = std::filesystem;

#if TEMPER_WITH_SERVE

namespace {

// A run directory serves its newest checkpoint; anything else opens as `temper generate` opens it.
std::string resolve_model_path(const std::string& path) {
  if (fs::is_directory(path) && !io::is_hf_model_dir(path) && fs::is_directory(fs::path(path) / "checkpoints")) {
    std::string ckpt = latest_checkpoint(path);
    TEMPER_CHECK(!ckpt.empty()) << path << ": a run directory without a complete checkpoint (checkpoints/step-N)";
    return ckpt;
  }
  return path;
}

std::string default_name(const std::string& path) {
  fs::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // a trailing slash
  return p.filename().string();
}

}  // namespace

int serve(const ServeCmdOptions& o) {
  // First, before any thread exists: SIGINT/SIGTERM blocked everywhere and taken by one waiting thread.
  StopSignals signals;
  std::mutex mu;
  serve::Server* running = nullptr;
  bool stop_asked = false;
  signals.start([&](int sig) {
    std::fprintf(stderr, "temper serve: %s: no new connections; finishing the requests in flight\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::lock_guard<std::mutex> l(mu);
    stop_asked = true;
    if (running) running->stop();
  });
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-stream is a failed write, not the end of the server

  if (o.threads > 0) set_num_threads(o.threads);
  TEMPER_CHECK(o.max_seqs >= 1) << "--max-seqs must be >= 1, got " << o.max_seqs;
  TEMPER_CHECK(o.port >= 0 && o.port <= 65535) << "--port must be in [0, 65535], got " << o.port;
  TEMPER_CHECK(o.kv_cache_gib > 0) << "--kv-cache-gib must be > 0, got " << o.kv_cache_gib;
  const std::string path = resolve_model_path(o.model);
  LoadedModel lm = load_model(path);
  attach_device(*lm.model, o.device);
  TEMPER_CHECK(lm.tokenizer != nullptr) << path << ": has no tokenizer; temper serve needs one";
  const text::Tokenizer& tok = *lm.tokenizer;
  const ModelConfig& cfg = lm.model->config();

  serve::ServedModel sm =
      make_served_model(o.served_model_name.empty() ? default_name(o.model) : o.served_model_name, lm.tokenizer,
                        lm.eos_ids, o.chat_template, o.tool_call_format, cfg, o.max_seqs, 0);

  // The KV cache: the budget, and never less than one full context (plus a block per sequence for forks).
  const int64_t block = kKvBlockSize;
  const DType kvd = kv_dtype(lm.model->precision());
  const int64_t budget = KvPool::blocks_for_budget(cfg, block, static_cast<size_t>(o.kv_cache_gib * (1ull << 30)), kvd);
  const int64_t blocks = std::max(budget, (sm.context + block - 1) / block + o.max_seqs + 1);
  KvPool pool(cfg, block, blocks, kvd);
  sm.kv_tokens = blocks * block;
  rollout::EngineConfig ec{o.max_seqs, [&tok](int32_t id) { return tok.token_bytes(id); }};
  serve::EngineBackend backend(*lm.model, pool, ec);

  serve::ServeOptions so;
  so.host = o.host;
  so.port = o.port;
  so.max_concurrency = o.max_concurrency;
  so.max_body_bytes = o.max_body_bytes;
  serve::Server server(so, sm, backend);
  const int port = server.bind();
  backend.start();
  std::fprintf(stderr,
               "temper serve: %s (%s, %.1fM params, context %lld) as \"%s\" on http://%s:%d/v1; chat template %s, "
               "tool calls %s; max-seqs %lld, max-concurrency %lld, KV cache %lld tokens\n",
               path.c_str(), lm.format.c_str(), lm.model->num_params() / 1e6, static_cast<long long>(sm.context),
               sm.name.c_str(), o.host.c_str(), port,
               sm.chat_template ? sm.chat_template->name().c_str() : "none (only /v1/completions)",
               std::string(text::tool_call_format_name(sm.tool_format)).c_str(), static_cast<long long>(o.max_seqs),
               static_cast<long long>(o.max_concurrency), static_cast<long long>(blocks * block));
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> l(mu);
    running = &server;
    if (stop_asked) server.stop();
  }
  server.listen();  // returns after stop(), once every handler has finished
  {
    std::lock_guard<std::mutex> l(mu);
    running = nullptr;
  }
  backend.shutdown();
  signals.stop();
  std::fprintf(stderr, "temper serve: stopped after %lld requests, %lld engine steps\n",
               static_cast<long long>(server.served()), static_cast<long long>(backend.steps()));
  return 0;
}

#else

int serve(const ServeCmdOptions&) {
  TEMPER_FAIL() << "temper serve: this build has no HTTP server (cpp-httplib was not found when it was configured; "
                   "run scripts/bootstrap, which installs libcpp-httplib-dev, then cmake again)";
}

#endif

}  // namespace temper::app
