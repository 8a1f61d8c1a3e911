// The temper command line: subcommands over the library. Catches temper::Error at the top, prints
// it, and exits non-zero.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "temper/app/bench_cuda.h"
#include "temper/app/bench_load.h"
#include "temper/app/bench_rollout.h"
#include "temper/app/bench_speculative.h"
#include "temper/app/bench_train.h"
#include "temper/app/convert.h"
#include "temper/app/generate.h"
#include "temper/app/tokenize.h"
#include "temper/app/logits.h"
#include "temper/app/info.h"
#include "temper/app/report_cmd.h"
#include "temper/app/sandbox_cmd.h"
#include "temper/app/serve_cmd.h"
#include "temper/app/train_cmd.h"
#include "temper/app/eval_cmd.h"
#include "temper/core/error.h"
#include "temper/dist/communicator.h"
#include "temper/version.h"

namespace {

// The error line, then the exit code. Under mpirun a failing rank ends every rank (MPI_Abort), so
// none is left waiting in a collective.
int fail(int code, const char* kind, const char* what) {
  const bool dp = temper::dist::launched_by_mpi() && temper::dist::mpi_available();
  if (dp && temper::dist::world().size() > 1) {
    std::fprintf(stderr, "temper: %s (rank %d of %d): %s\n", kind, temper::dist::world().rank(), temper::dist::world().size(), what);
    std::fflush(stderr);
    temper::dist::world().abort(code);
  }
  std::fprintf(stderr, "temper: %s: %s\n", kind, what);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"temper: reinforcement-learning post-training of language models"};
  app.set_version_flag("--version", std::string("temper ") + TEMPER_VERSION);
  app.require_subcommand(1);

  auto* bench = app.add_subcommand("bench", "Measure throughput");
  bench->require_subcommand(1);
  temper::app::BenchTrainOptions bt;
  auto* train = bench->add_subcommand("train", "Forward + backward + AdamW tokens/s of the training step");
  auto* shape_opt = train->add_option("--shape", bt.shape,
                                      "Built-in shape: smollm2-135m, qwen2.5-0.5b, llama3.2-0.5b, qwen3-0.6b, "
                                      "mistral-0.5b, gemma2-0.5b, gemma3-0.5b, phi3-0.5b, tiny");
  train->add_option("--model", bt.model_dir, "Hugging Face model directory (config.json [+ model.safetensors])")
      ->excludes(shape_opt);
  train->add_option("--batch", bt.batch, "Sequences per step")->capture_default_str();
  train->add_option("--seq", bt.seq, "Tokens per sequence")->capture_default_str();
  train->add_option("--threads", bt.threads, "Threads (default: all cores, or TEMPER_THREADS)");
  train->add_option("--dtype", bt.dtype, "f32, or bf16 (bf16 GEMMs, f32 master weights and AdamW state)")
      ->capture_default_str();
  train->add_option("--steps", bt.steps, "Timed steps")->capture_default_str();
  train->add_option("--warmup", bt.warmup, "Untimed steps first")->capture_default_str();
  train->add_option("--micro-batch", bt.micro_batch, "Rows per micro-batch (gradient accumulation)");
  train->add_flag("--recompute", bt.recompute, "Recompute each layer's activations in the backward");
  train->add_flag("--json", bt.json, "Print only the JSON result line");
  train->add_flag("--profile", bt.profile, "Add seconds per step by phase to the JSON");
  train->add_flag("--quick", bt.quick, "Smoke run: tiny shape, batch 4 x seq 64, 3 steps");
  train->add_flag("--print-config", bt.print_config,
                  "Print the shape's Hugging Face config.json (the PyTorch peers build from it) and exit");
  train->add_option("--device", bt.device, "cpu, cuda, cuda:N or mirror")->capture_default_str();

  temper::app::BenchLoadOptions bl;
  auto* load = bench->add_subcommand("load", "Model load time, file mmapped vs copied");
  load->add_option("--model", bl.model, "Model (Hugging Face directory or .gguf)")->required();
  load->add_option("--repeat", bl.repeat, "Loads per mode (best is reported)")->capture_default_str();

  temper::app::BenchRolloutOptions br;
  auto* roll = bench->add_subcommand("rollout", "Batched generation (rollout engine): prefill and decode tokens/s");
  auto* rshape = roll->add_option("--shape", br.shape,
                                  "Built-in shape with random weights: smollm2-135m, qwen2.5-0.5b, llama3.2-0.5b, "
                                  "qwen3-0.6b, mistral-0.5b, gemma2-0.5b, gemma3-0.5b, phi3-0.5b, tiny");
  roll->add_option("--model", br.model, "A model (Hugging Face directory or .gguf)")->excludes(rshape);
  roll->add_option("--batch", br.batch, "Sequences (prompts with --group)")->capture_default_str();
  roll->add_option("--group", br.group, "Samples per prompt sharing its prefill (batch x group sequences)")
      ->capture_default_str();
  roll->add_option("--prompt-len", br.prompt_len, "Prompt tokens per sequence")->capture_default_str();
  roll->add_option("--gen-len", br.gen_len, "Generated tokens per sequence")->capture_default_str();
  roll->add_option("--threads", br.threads, "Threads");
  roll->add_option("--dtype", br.dtype, "f32 or bf16 GEMMs")->capture_default_str();
  roll->add_option("--device", br.device, "cpu, cuda, cuda:N or mirror (the model's forward there)")->capture_default_str();
  roll->add_flag("--json", br.json, "JSON only (the default output)");
  roll->add_flag("--profile", br.profile, "Add milliseconds per decode step by phase to the JSON");
  roll->add_flag("--speculative", br.speculative,
                 "With and without speculative decoding (4-bit self-drafter) at each of --batches");
  roll->add_option("--batches", br.batches, "--speculative: batch sizes, comma-separated")->capture_default_str();
  roll->add_option("--gamma", br.gamma, "--speculative: draft tokens per cycle")->capture_default_str();
  roll->add_option("--drafter-group", br.drafter_group, "--speculative: inputs per int4 scale")->capture_default_str();
  roll->add_option("--drafter-head", br.drafter_head, "--speculative: the drafter's LM head: bf16, int4 or f32 (the policy's)")->capture_default_str();
  roll->add_option("--drafter-vocab", br.drafter_vocab,
                   "--speculative: the drafter head's tokens, the most frequent in a plain run of other seeds (0: all)")
      ->capture_default_str();
  roll->add_option("--temperature", br.temperature, "--speculative: sampling temperature")->capture_default_str();

  temper::app::BenchCudaOptions bc;
  auto* bcuda = bench->add_subcommand("cuda", "GPU: bf16 training MFU, decode tokens/s vs the bandwidth roofline, GEMM TFLOP/s");
  bcuda->add_option("--what", bc.what, "train, decode, gemm or all")->capture_default_str();
  bcuda->add_option("--shape", bc.shape, "Built-in shape with random weights")->capture_default_str();
  bcuda->add_option("--device", bc.device, "CUDA device index")->capture_default_str();
  bcuda->add_option("--batch", bc.batch, "train/gemm: sequences per step")->capture_default_str();
  bcuda->add_option("--seq", bc.seq, "train/gemm: tokens per sequence")->capture_default_str();
  bcuda->add_option("--batches", bc.batches, "decode: batch sizes, comma-separated")->capture_default_str();
  bcuda->add_option("--gen-len", bc.gen_len, "decode: steps per batch")->capture_default_str();
  bcuda->add_option("--steps", bc.steps, "train: timed steps")->capture_default_str();
  bcuda->add_option("--warmup", bc.warmup, "train: untimed steps first")->capture_default_str();
  bcuda->add_option("--graph", bc.graph, "decode: replay steps as CUDA graphs (true/false)")->capture_default_str();
  bcuda->add_option("--peak-tflops", bc.peak_tflops, "Dense bf16 peak for MFU (default: from the device name)");

  temper::app::InfoOptions io;
  auto* info = app.add_subcommand("info", "Describe a model (HF directory or config.json) and this machine");
  info->add_option("model", io.model, "Model directory or config.json (optional)");

  temper::app::ConvertOptions co;
  auto* conv = app.add_subcommand("convert", "Convert a model between a Hugging Face directory and GGUF");
  conv->add_option("in", co.in, "Input model (Hugging Face directory or .gguf)")->required();
  conv->add_option("out", co.out, "Output: a directory (Hugging Face) or a path ending in .gguf")->required();
  conv->add_option("--dtype", co.dtype, "Weights of the output: HF f32 (default), bf16, f16; GGUF f16 (default), f32, bf16, q8_0");
  conv->add_flag("--overwrite", co.overwrite, "Replace OUT if it exists");

  temper::app::LogitsOptions lo;
  auto* lg = app.add_subcommand("logits", "One forward pass over token ids, printed as JSON (top-1 per position)");
  lg->add_option("--model", lo.model, "Model (Hugging Face directory or .gguf)")->required();
  lg->add_option("--ids", lo.ids, "Comma-separated token ids")->required();
  lg->add_flag("--full", lo.full, "Also print every logit of every position");

  temper::app::TokenizeOptions to;
  auto* tk = app.add_subcommand("tokenize", "Text to token ids (a JSON list); no BOS/EOS unless --special");
  tk->add_option("--model", to.model, "Model directory, tokenizer.json or .gguf")->required();
  auto* text_opt = tk->add_option("--text", to.text, "The text");
  tk->add_option("--file", to.file, "A file with the text")->excludes(text_opt);
  tk->add_flag("--special", to.special, "Add the tokenizer's BOS/EOS around the text");
  temper::app::TokenizeOptions dto;
  auto* dtk = app.add_subcommand("detokenize", "Token ids (1,2,3 or a JSON list; stdin if no --ids) to text");
  dtk->add_option("--model", dto.model, "Model directory, tokenizer.json or .gguf")->required();
  dtk->add_option("--ids", dto.ids, "Token ids");
  dtk->add_flag("--skip-special", dto.skip_special, "Leave out special tokens");

  temper::app::GenerateOptions go;
  auto* gen = app.add_subcommand("generate", "Generate text (chat template unless --raw); continuation on stdout");
  gen->add_option("--model", go.model, "Model (Hugging Face directory or .gguf)")->required();
  gen->add_option("--device", go.device, "cpu, cuda or cuda:N (the model's forward on that GPU)")->capture_default_str();
  auto* gprompt = gen->add_option("--prompt", go.prompt, "The user message (or, with --raw, the text to continue)");
  gen->add_option("--prompts", go.prompts_file, "JSONL of {\"prompt\": ...} or {\"messages\": [...]} (batched)")
      ->excludes(gprompt);
  gen->add_option("-n", go.samples, "Samples per prompt (with --prompts)")->capture_default_str();
  gen->add_option("--out", go.out, "JSONL output file (with --prompts; default stdout)");
  gen->add_option("--system", go.system, "A system message");
  gen->add_option("--chat-template", go.chat_template, "Override the model's template: chatml, llama3");
  gen->add_flag("--raw", go.raw, "No chat template: continue the prompt as plain text");
  gen->add_flag("--greedy", go.greedy, "Always the most likely token");
  gen->add_option("--max-new", go.max_new, "Most new tokens")->capture_default_str();
  gen->add_option("--temperature", go.temperature, "Sampling temperature")->capture_default_str();
  gen->add_option("--top-p", go.top_p, "Nucleus sampling mass")->capture_default_str();
  gen->add_option("--top-k", go.top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  gen->add_option("--min-p", go.min_p, "Drop tokens below min_p * p_max")->capture_default_str();
  gen->add_option("--repetition-penalty", go.repetition_penalty, "Divide positive logits (multiply negative) of recent tokens")
      ->capture_default_str();
  gen->add_option("--presence-penalty", go.presence_penalty, "Subtract from logits of recent tokens")->capture_default_str();
  gen->add_option("--frequency-penalty", go.frequency_penalty, "Subtract per occurrence in recent tokens")
      ->capture_default_str();
  gen->add_option("--penalty-last-n", go.penalty_last_n, "Penalty window over prompt + completion (-1: all)")
      ->capture_default_str();
  gen->add_option("--stop", go.stop, "Stop string (repeatable)");
  gen->add_option("--seed", go.seed, "Sampling seed")->capture_default_str();
  gen->add_flag("--speculative", go.speculative, "Speculative decoding with the model's 4-bit self-drafter (same output distribution)");
  gen->add_option("--gamma", go.gamma, "--speculative: draft tokens per cycle")->capture_default_str();
  gen->add_option("--draft-head", go.draft_head, "--speculative: the drafter's LM head: bf16, int4 or f32")->capture_default_str();
  gen->add_option("--threads", go.threads, "Threads");
  gen->add_option("--preference", go.preference, "Fair RL: the trade-off (per-objective weights summing to 1, e.g. 0.7,0.3), written before the prompt");
  gen->add_option("--preference-prefix", go.preference_prefix, "The preference's text, with {p} (default: \"<pref {p}>\\n\")");

  temper::app::TrainOptions tro;
  auto* trn = app.add_subcommand("train", "SFT then RL on a task (no recipe: the built-in quickstart); writes a run directory");
  trn->add_option("recipe", tro.recipe, "Recipe (TOML); none: the built-in quickstart");
  trn->add_option("--set", tro.sets, "Override a recipe key: --set rl.lr=1e-5 (repeatable)");
  trn->add_option("--out", tro.out, "Run directory (default: the recipe's run.out)");
  trn->add_option("--resume", tro.resume, "Continue the run in this directory from its newest checkpoint");
  trn->add_option("--threads", tro.threads, "Threads (default: all cores)");
  trn->add_option("--device", tro.device, "cpu, cuda or cuda:N: the policy on that GPU (the recipe's model.device)");
  trn->add_option("--stop-after", tro.stop_after, "Checkpoint and exit after this step (as on SIGTERM); continue with --resume");
  trn->add_flag("--list-keys", tro.list_keys,
                "Print every recipe section and key with its default and meaning (Markdown)");

  temper::app::EvalOptions ev;
  auto* evc = app.add_subcommand("eval", "Held-out accuracy of a model on a task: pass@k, mean length, per difficulty");
  evc->add_option("--model", ev.model, "Model (Hugging Face directory, a run's checkpoint, or .gguf)")->required();
  evc->add_option("--task", ev.task, "Task: arithmetic, countdown, string_ops, compose, constraints, dataset, mixture, user_sim, rubric_proxy, code")->capture_default_str();
  evc->add_option("--param", ev.params, "Task parameter key=value (repeatable), e.g. --param max_ops=3");
  evc->add_option("--problems", ev.problems, "Held-out problems")->capture_default_str();
  evc->add_option("--device", ev.device, "cpu, cuda or cuda:N (the model's forwards on that GPU)")->capture_default_str();
  evc->add_option("-k,--samples", ev.samples, "Samples per problem (1: greedy)")->capture_default_str();
  evc->add_option("--max-new", ev.max_new, "Most new tokens per completion")->capture_default_str();
  evc->add_option("--temperature", ev.temperature, "Sampling temperature (k > 1)")->capture_default_str();
  evc->add_option("--top-p", ev.top_p, "Nucleus mass (k > 1)")->capture_default_str();
  evc->add_option("--prompt-format", ev.prompt_format, "auto, raw or chat")->capture_default_str();
  evc->add_option("--system-prompt", ev.system_prompt, "Chat system message (a recipe's model.system_prompt)");
  evc->add_option("--user-template", ev.user_template,
                  "How a problem is asked: {question} stands for its text (a recipe's model.user_template)");
  evc->add_option("--seed", ev.seed, "Sampling seed")->capture_default_str();
  evc->add_option("--reward-timeout", ev.reward_timeout_s,
                  "Seconds a verification may take; a later one scores 0 and is counted (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  evc->add_flag("--speculative", ev.speculative,
                "Speculative decoding with the model's 4-bit self-drafter where its cost model predicts a speed-up "
                "(same greedy output)");
  evc->add_option("--gamma", ev.gamma, "--speculative: draft tokens per cycle")->capture_default_str();
  evc->add_option("--draft-head", ev.draft_head, "--speculative: the drafter's LM head: bf16, int4 or f32")
      ->capture_default_str();
  evc->add_option("--revisions", ev.revisions, "Sequential revision rounds after a wrong first attempt (feedback: incorrect)")
      ->capture_default_str();
  evc->add_option("--revision-template", ev.revision_template,
                  "Revision prompt with {question} and {attempt} (default: the question, the attempt, \"The previous answer is incorrect.\")");
  evc->add_option("--json", ev.json_out, "Write the JSON result here (default: stdout)");
  evc->add_option("--samples-out", ev.samples_out, "Write every sample here (JSONL: id, sample, prompt, completion, answer, reward, correct)");
  evc->add_option("--threads", ev.threads, "Threads");
  evc->add_option("--preference", ev.preference, "Fair RL: the trade-off, per-objective weights summing to 1 (e.g. 0.7,0.3), written before each question");
  evc->add_option("--objectives", ev.objectives,
                  "Objectives measured per sample: correct, brevity, format, task:K or task:NAME (an entry of the "
                  "task's reward vector; comma list; with a --preference of 2 values, default correct,brevity)");
  evc->add_option("--ggf", ev.ggf, "Gini weights, strictly decreasing (default: linear)");
  evc->add_option("--preference-prefix", ev.preference_prefix, "The preference's text before the question, with {p} (default: \"<pref {p}>\\n\")");

  temper::app::ReportOptions ro;
  auto* rep = app.add_subcommand("report", "Write RUN_DIR/report.html: metric charts, summary, samples, config");
  rep->add_option("run_dir", ro.run_dir, "Run directory (holds metrics.jsonl)")->required();
  rep->add_option("--out", ro.out, "Write the page here instead of RUN_DIR/report.html");

  temper::app::CompareCmdOptions cmp;
  auto* cmpc = app.add_subcommand("compare", "Compare runs side by side: charts per metric (a colour per arm), summary over seeds");
  cmpc->add_option("runs", cmp.runs, "ARM=RUN_DIR, several per arm for seeds")->required();
  cmpc->add_option("--out", cmp.out, "Output directory (compare.html, <kind>_<metric>.svg, summary.md/json)")->required();
  cmpc->add_option("--metric", cmp.metrics, "KIND:NAME (default: eval_accuracy, reward_mean, entropy, response_len_mean)")
      ->allow_extra_args(false);  // one value per --metric: a run list may follow
  cmpc->add_option("--smooth", cmp.smooth, "Trailing mean over N steps in per-step charts")->capture_default_str();
  cmpc->add_option("--tail", cmp.tail, "Share of the last steps a per-step final value averages")->capture_default_str();
  cmpc->add_option("--title", cmp.title, "Page title")->capture_default_str();

  temper::app::ServeCmdOptions svo;
  auto* srv = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, "
                                          "/v1/models) on the rollout engine with continuous batching");
  srv->add_option("--model", svo.model, "Model: Hugging Face directory, .gguf, a checkpoint or a run directory (its newest checkpoint)")
      ->required();
  srv->add_option("--host", svo.host, "Address to listen on")->capture_default_str();
  srv->add_option("--port", svo.port, "Port (0: any free one, printed)")->capture_default_str();
  srv->add_option("--max-seqs", svo.max_seqs, "Sequences decoding at once (the engine's batch; n <= this)")->capture_default_str();
  srv->add_option("--max-concurrency", svo.max_concurrency, "Generation requests in flight; one more gets 429")
      ->capture_default_str();
  srv->add_option("--max-body-bytes", svo.max_body_bytes, "Largest request body; a larger one gets 413")->capture_default_str();
  srv->add_option("--kv-cache-gib", svo.kv_cache_gib, "KV cache budget in GiB (at least one full context)")->capture_default_str();
  srv->add_option("--device", svo.device, "cpu, cuda or cuda:N (the model's forward on that GPU)")->capture_default_str();
  srv->add_option("--chat-template", svo.chat_template, "Override the model's chat template: chatml, llama3");
  srv->add_option("--served-model-name", svo.served_model_name, "The model's name in the API (default: the path's last part)");
  srv->add_option("--tool-call-format", svo.tool_call_format,
                  "Tool-call syntax parsed out of chat replies: auto (from the template), hermes, llama3_json, mistral, none")
      ->capture_default_str();
  srv->add_option("--threads", svo.threads, "Threads");

  auto* sbx = app.add_subcommand("sandbox",
                                  "Run Python code against unit tests in the sandbox: JSON requests on stdin "
                                  "{\"code\", \"tests\", \"limits\"}, one JSON line each on stdout");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (train->parsed()) return temper::app::bench_train(bt);
    if (load->parsed()) return temper::app::bench_load(bl);
    if (bcuda->parsed()) return temper::app::bench_cuda(bc);
    if (roll->parsed()) return br.speculative ? temper::app::bench_speculative(br) : temper::app::bench_rollout(br);
    if (info->parsed()) return temper::app::info(io);
    if (conv->parsed()) return temper::app::convert(co);
    if (lg->parsed()) return temper::app::logits(lo);
    if (tk->parsed()) return temper::app::tokenize(to);
    if (dtk->parsed()) return temper::app::detokenize(dto);
    if (gen->parsed()) return temper::app::generate(go);
    if (rep->parsed()) return temper::app::report(ro);
    if (cmpc->parsed()) return temper::app::compare(cmp);
    if (trn->parsed()) return temper::app::train(tro);
    if (evc->parsed()) return temper::app::eval(ev);
    if (sbx->parsed()) return temper::app::sandbox_cmd();
    if (srv->parsed()) return temper::app::serve(svo);
  } catch (const temper::Error& e) {
    return fail(1, "error", e.what());
  } catch (const std::filesystem::filesystem_error& e) {  // a path that cannot be read or written
    return fail(1, "error", e.what());
  } catch (const std::exception& e) {
    return fail(2, "internal error", e.what());
  }
  return 0;
}
