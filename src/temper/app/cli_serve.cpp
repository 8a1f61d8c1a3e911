// The options of `temper serve` and `temper sandbox`.
#include "temper/app/cli_serve.h"

#include <memory>

#include "temper/app/sandbox_cmd.h"

namespace temper::app {

CLI::App* add_serve_command(CLI::App& app, ServeCmdOptions& o) {
  auto* srv = app.add_subcommand("serve",
                                 "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, "
                                 "/v1/models) on the rollout engine with continuous batching");
  srv->add_option("--model", o.model,
                  "Model: Hugging Face directory, .gguf, a checkpoint or a run directory (its newest checkpoint)")
      ->required();
  srv->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  srv->add_option("--port", o.port, "Port (0: any free one, printed)")->capture_default_str();
  srv->add_option("--max-seqs", o.max_seqs, "Sequences decoding at once (the engine's batch; n <= this)")
      ->capture_default_str();
  srv->add_option("--max-concurrency", o.max_concurrency, "Generation requests in flight; one more gets 429")
      ->capture_default_str();
  srv->add_option("--max-body-bytes", o.max_body_bytes, "Largest request body; a larger one gets 413")
      ->capture_default_str();
  srv->add_option("--kv-cache-gib", o.kv_cache_gib, "KV cache budget in GiB (at least one full context)")
      ->capture_default_str();
  srv->add_option("--device", o.device, "cpu, cuda or cuda:N (the model's forward on that GPU)")->capture_default_str();
  srv->add_option("--chat-template", o.chat_template, "Override the model's chat template: chatml, llama3");
  srv->add_option("--served-model-name", o.served_model_name,
                  "The model's name in the API (default: the path's last part)");
  srv->add_option("--tool-call-format", o.tool_call_format,
                  "Tool-call syntax parsed out of chat replies: auto (from the template), hermes, llama3_json, "
                  "mistral, none")
      ->capture_default_str();
  add_threads_option(srv, o.threads, "Threads");
  return srv;
}

CLI::App* add_sandbox_command(CLI::App& app) {
  return app.add_subcommand("sandbox",
                            "Run Python code against unit tests in the sandbox: JSON requests on stdin "
                            "{\"code\", \"tests\", \"limits\"}, one JSON line each on stdout");
}

void add_serve_commands(CLI::App& app, std::vector<Command>& commands) {
  auto svo = std::make_shared<ServeCmdOptions>();
  commands.push_back({add_serve_command(app, *svo), [svo] { return serve(*svo); }});
  commands.push_back({add_sandbox_command(app), [] { return sandbox_cmd(); }});
}

}  // namespace temper::app
