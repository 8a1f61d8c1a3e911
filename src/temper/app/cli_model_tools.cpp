// The options of `temper info`, `convert`, `logits`, `tokenize`, `detokenize` and `generate`.
#include "temper/app/cli_model_tools.h"

#include <memory>

namespace temper::app {

CLI::App* add_info_command(CLI::App& app, InfoOptions& o) {
  auto* info = app.add_subcommand(
      "info",
      "Describe a model (HF directory, config.json or GGUF) and this machine, and plan the memory training it "
      "takes per rank (from the config alone: nothing is allocated)");
  info->add_option("model", o.model, "Model directory, config.json or .gguf (optional)");
  info->add_option("--device", o.device, "Plan for cpu, mirror, cuda or cuda:N")->capture_default_str();
  info->add_option("--device-memory", o.device_memory_gib,
                   "GiB of device memory to plan for (default: this machine's memory, or the CUDA device's)");
  info->add_option("--precision", o.precision, "f32, or bf16 (bf16 GEMMs, f32 master weights)")->capture_default_str();
  info->add_flag("--recompute", o.recompute, "Recompute each layer's activations in the backward");
  info->add_option("--batch", o.batch, "Sequences per micro-batch (forward/backward)")->capture_default_str();
  info->add_option("--seq", o.seq, "Tokens per sequence (default: 1024 or the model's context if shorter)");
  info->add_option("--ranks", o.ranks, "Data-parallel ranks (the plan is per rank)")->capture_default_str();
  info->add_flag("--zero", o.zero, "ZeRO-1: each rank keeps 1/ranks of the AdamW moments (run.shard_optimizer)");
  info->add_flag("--zero2", o.zero2,
                 "ZeRO-2: each rank keeps 1/ranks of the AdamW moments and of the gradients (run.shard_gradients)");
  info->add_option("--max-new", o.max_new, "RL: completion tokens per rollout (0: no rollouts)")->capture_default_str();
  info->add_option("--prompts", o.prompts, "RL: prompts per step")->capture_default_str();
  info->add_option("--group", o.group, "RL: completions per prompt")->capture_default_str();
  info->add_option("--max-seqs", o.max_seqs, "RL: sequences decoded together")->capture_default_str();
  info->add_option("--kv-mb", o.kv_mb, "RL: KV cache MiB (rl.kv_memory_mb; 0: enough for the rollouts)")
      ->capture_default_str();
  info->add_flag("--kl", o.kl, "A frozen KL reference (rl.kl_coef > 0)");
  info->add_flag("--eval", o.eval, "Held-out evaluation as temper train runs it (its decode copy and KV cache)");
  info->add_option("--lora", o.lora, "LoRA rank on q,k,v,o,gate,up,down (0: full fine-tuning)")->capture_default_str();
  info->add_flag("--qlora", o.qlora, "QLoRA: the frozen base's block products in int4 (with --lora R)");
  info->add_option("--lora-base", o.lora_base,
                   "The base under --lora R: f32 (the model's weights), bf16 (default), int4 or nf4 (QLoRA)");
  info->add_option("--teacher", o.teacher, "A teacher model (config.json, HF directory or .gguf)");
  info->add_flag("--json", o.json, "Print only the plan, as one JSON object");
  return info;
}

CLI::App* add_convert_command(CLI::App& app, ConvertOptions& o) {
  auto* conv = app.add_subcommand("convert", "Convert a model between a Hugging Face directory and GGUF");
  conv->add_option("in", o.in, "Input model (Hugging Face directory or .gguf)")->required();
  conv->add_option("out", o.out, "Output: a directory (Hugging Face) or a path ending in .gguf")->required();
  conv->add_option("--dtype", o.dtype,
                   "Weights of the output: HF f32 (default), bf16, f16; GGUF f16 (default), f32, bf16, q8_0");
  conv->add_flag("--overwrite", o.overwrite, "Replace OUT if it exists");
  conv->add_option("--merge-lora", o.merge_lora,
                   "A PEFT LoRA adapter directory (a [lora] run's checkpoint) merged into the weights first (an "
                   "adapter trained on [lora] base = \"int4\" / \"nf4\" / \"bf16\" is merged into the base's "
                   "dequantised / bf16-rounded weights, as the run multiplied by them)");
  return conv;
}

CLI::App* add_logits_command(CLI::App& app, LogitsOptions& o) {
  auto* lg = app.add_subcommand("logits", "One forward pass over token ids, printed as JSON (top-1 per position)");
  lg->add_option("--model", o.model, "Model (Hugging Face directory or .gguf)")->required();
  lg->add_option("--ids", o.ids, "Comma-separated token ids")->required();
  lg->add_flag("--full", o.full, "Also print every logit of every position");
  return lg;
}

CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& o) {
  auto* tk = app.add_subcommand("tokenize", "Text to token ids (a JSON list); no BOS/EOS unless --special");
  tk->add_option("--model", o.model, "Model directory, tokenizer.json or .gguf")->required();
  auto* text_opt = tk->add_option("--text", o.text, "The text");
  tk->add_option("--file", o.file, "A file with the text")->excludes(text_opt);
  tk->add_flag("--special", o.special, "Add the tokenizer's BOS/EOS around the text");
  return tk;
}

CLI::App* add_detokenize_command(CLI::App& app, TokenizeOptions& o) {
  auto* dtk = app.add_subcommand("detokenize", "Token ids (1,2,3 or a JSON list; stdin if no --ids) to text");
  dtk->add_option("--model", o.model, "Model directory, tokenizer.json or .gguf")->required();
  dtk->add_option("--ids", o.ids, "Token ids");
  dtk->add_flag("--skip-special", o.skip_special, "Leave out special tokens");
  return dtk;
}

CLI::App* add_generate_command(CLI::App& app, GenerateOptions& o) {
  auto* gen = app.add_subcommand("generate", "Generate text (chat template unless --raw); continuation on stdout");
  gen->add_option("--model", o.model, "Model (Hugging Face directory or .gguf)")->required();
  gen->add_option("--device", o.device, "cpu, cuda or cuda:N (the model's forward on that GPU)")->capture_default_str();
  auto* gprompt = gen->add_option("--prompt", o.prompt, "The user message (or, with --raw, the text to continue)");
  gen->add_option("--prompts", o.prompts_file, "JSONL of {\"prompt\": ...} or {\"messages\": [...]} (batched)")
      ->excludes(gprompt);
  gen->add_option("-n", o.samples, "Samples per prompt (with --prompts)")->capture_default_str();
  gen->add_option("--out", o.out, "JSONL output file (with --prompts; default stdout)");
  gen->add_option("--system", o.system, "A system message");
  gen->add_option("--chat-template", o.chat_template, "Override the model's template: chatml, llama3");
  gen->add_flag("--raw", o.raw, "No chat template: continue the prompt as plain text");
  gen->add_flag("--greedy", o.greedy, "Always the most likely token");
  gen->add_option("--max-new", o.max_new, "Most new tokens")->capture_default_str();
  gen->add_option("--temperature", o.temperature, "Sampling temperature")->capture_default_str();
  gen->add_option("--top-p", o.top_p, "Nucleus sampling mass")->capture_default_str();
  gen->add_option("--top-k", o.top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  gen->add_option("--min-p", o.min_p, "Drop tokens below min_p * p_max")->capture_default_str();
  gen->add_option("--repetition-penalty", o.repetition_penalty,
                  "Divide positive logits (multiply negative) of recent tokens")
      ->capture_default_str();
  gen->add_option("--presence-penalty", o.presence_penalty, "Subtract from logits of recent tokens")
      ->capture_default_str();
  gen->add_option("--frequency-penalty", o.frequency_penalty, "Subtract per occurrence in recent tokens")
      ->capture_default_str();
  gen->add_option("--penalty-last-n", o.penalty_last_n, "Penalty window over prompt + completion (-1: all)")
      ->capture_default_str();
  gen->add_option("--stop", o.stop, "Stop string (repeatable)");
  gen->add_option("--seed", o.seed, "Sampling seed")->capture_default_str();
  gen->add_flag("--speculative", o.speculative,
                "Speculative decoding with the model's 4-bit self-drafter (same output distribution)");
  gen->add_option("--gamma", o.gamma, "--speculative: draft tokens per cycle")->capture_default_str();
  gen->add_option("--draft-head", o.draft_head, "--speculative: the drafter's LM head: bf16, int4 or f32")
      ->capture_default_str();
  add_threads_option(gen, o.threads, "Threads");
  gen->add_option(
      "--preference", o.preference,
      "Fair RL: the trade-off (per-objective weights summing to 1, e.g. 0.7,0.3), written before the prompt");
  gen->add_option("--preference-prefix", o.preference_prefix,
                  "The preference's text, with {p} (default: \"<pref {p}>\\n\")");
  gen->add_option("--ggf", o.ggf, "Fair RL: the Gini weights for {w} in --preference-prefix (e.g. 0.7,0.3)");
  return gen;
}

void add_model_tool_commands(CLI::App& app, std::vector<Command>& commands) {
  auto io = std::make_shared<InfoOptions>();
  commands.push_back({add_info_command(app, *io), [io] { return info(*io); }});
  auto co = std::make_shared<ConvertOptions>();
  commands.push_back({add_convert_command(app, *co), [co] { return convert(*co); }});
  auto lo = std::make_shared<LogitsOptions>();
  commands.push_back({add_logits_command(app, *lo), [lo] { return logits(*lo); }});
  auto to = std::make_shared<TokenizeOptions>();
  commands.push_back({add_tokenize_command(app, *to), [to] { return tokenize(*to); }});
  auto dto = std::make_shared<TokenizeOptions>();
  commands.push_back({add_detokenize_command(app, *dto), [dto] { return detokenize(*dto); }});
  auto go = std::make_shared<GenerateOptions>();
  commands.push_back({add_generate_command(app, *go), [go] { return generate(*go); }});
}

}  // namespace temper::app
