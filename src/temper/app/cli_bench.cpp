// The options of `temper bench train|load|rollout|cuda|roofline`.
#include "temper/app/cli_bench.h"

#include <memory>

#include "temper/app/bench_dit.h"
#include "temper/app/bench_speculative.h"

namespace temper::app {

CLI::App* add_bench_train_command(CLI::App& bench, BenchTrainOptions& o) {
  auto* train = bench.add_subcommand("train", "Forward + backward + AdamW tokens/s of the training step");
  auto* shape_opt = train->add_option("--shape", o.shape,
                                      "Built-in shape: smollm2-135m, qwen2.5-0.5b, llama3.2-0.5b, qwen3-0.6b, "
                                      "mistral-0.5b, gemma2-0.5b, gemma3-0.5b, phi3-0.5b, tiny");
  train->add_option("--model", o.model_dir, "Hugging Face model directory (config.json [+ model.safetensors])")
      ->excludes(shape_opt);
  train->add_option("--batch", o.batch, "Sequences per step")->capture_default_str();
  train->add_option("--seq", o.seq, "Tokens per sequence")->capture_default_str();
  add_threads_option(train, o.threads, "Threads (default: all cores, or TEMPER_THREADS)");
  train->add_option("--dtype", o.dtype, "f32, or bf16 (bf16 GEMMs, f32 master weights and AdamW state)")
      ->capture_default_str();
  train->add_option("--steps", o.steps, "Timed steps")->capture_default_str();
  train->add_option("--warmup", o.warmup, "Untimed steps first")->capture_default_str();
  train->add_option("--micro-batch", o.micro_batch, "Rows per micro-batch (gradient accumulation)");
  train->add_flag("--recompute", o.recompute, "Recompute each layer's activations in the backward");
  train
      ->add_option("--zero", o.zero,
                   "Under mpirun: 1 shards the AdamW moments over the ranks (ZeRO-1), 2 the gradients too (ZeRO-2)")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  train->add_flag("--json", o.json, "Print only the JSON result line");
  train->add_flag("--profile", o.profile, "Add seconds per step by phase to the JSON");
  train->add_flag("--quick", o.quick, "Smoke run: tiny shape, batch 4 x seq 64, 3 steps");
  train->add_flag("--print-config", o.print_config,
                  "Print the shape's Hugging Face config.json (the PyTorch peers build from it) and exit");
  train->add_option("--device", o.device, "cpu, cuda, cuda:N or mirror")->capture_default_str();
  train->add_option("--lora", o.lora, "LoRA rank on q,k,v,o,gate,up,down (alpha 2 x rank; 0: full fine-tuning)")
      ->capture_default_str();
  train
      ->add_option("--lora-base", o.lora_base,
                   "The frozen base under --lora: f32, bf16, int4 or nf4 (QLoRA), held as it loads")
      ->capture_default_str();
  return train;
}

CLI::App* add_bench_load_command(CLI::App& bench, BenchLoadOptions& o) {
  auto* load = bench.add_subcommand("load", "Model load time, file mmapped vs copied");
  load->add_option("--model", o.model, "Model (Hugging Face directory or .gguf)")->required();
  load->add_option("--repeat", o.repeat, "Loads per mode (best is reported)")->capture_default_str();
  return load;
}

CLI::App* add_bench_rollout_command(CLI::App& bench, BenchRolloutOptions& o) {
  auto* roll = bench.add_subcommand("rollout", "Batched generation (rollout engine): prefill and decode tokens/s");
  auto* rshape = roll->add_option("--shape", o.shape,
                                  "Built-in shape with random weights: smollm2-135m, qwen2.5-0.5b, llama3.2-0.5b, "
                                  "qwen3-0.6b, mistral-0.5b, gemma2-0.5b, gemma3-0.5b, phi3-0.5b, tiny");
  roll->add_option("--model", o.model, "A model (Hugging Face directory or .gguf)")->excludes(rshape);
  roll->add_option("--batch", o.batch, "Sequences (prompts with --group)")->capture_default_str();
  roll->add_option("--group", o.group, "Samples per prompt sharing its prefill (batch x group sequences)")
      ->capture_default_str();
  roll->add_option("--prompt-len", o.prompt_len, "Prompt tokens per sequence")->capture_default_str();
  roll->add_option("--gen-len", o.gen_len, "Generated tokens per sequence")->capture_default_str();
  add_threads_option(roll, o.threads, "Threads");
  roll->add_option("--dtype", o.dtype, "f32 or bf16 GEMMs")->capture_default_str();
  roll->add_option("--device", o.device, "cpu, cuda, cuda:N or mirror (the model's forward there)")
      ->capture_default_str();
  roll->add_flag("--json", o.json, "JSON only (the default output)");
  roll->add_flag("--profile", o.profile, "Add milliseconds per decode step by phase to the JSON");
  roll->add_flag("--speculative", o.speculative,
                 "With and without speculative decoding (4-bit self-drafter) at each of --batches");
  roll->add_option("--batches", o.batches, "--speculative: batch sizes, comma-separated")->capture_default_str();
  roll->add_option("--gamma", o.gamma, "--speculative: draft tokens per cycle")->capture_default_str();
  roll->add_option("--drafter-group", o.drafter_group, "--speculative: inputs per int4 scale")->capture_default_str();
  roll->add_option("--drafter-head", o.drafter_head,
                   "--speculative: the drafter's LM head: bf16, int4 or f32 (the policy's)")
      ->capture_default_str();
  roll->add_option("--drafter-vocab", o.drafter_vocab,
                   "--speculative: the drafter head's tokens, the most frequent in a plain run of other seeds (0: all)")
      ->capture_default_str();
  roll->add_option("--temperature", o.temperature, "--speculative: sampling temperature")->capture_default_str();
  roll->add_option("--lora", o.lora, "LoRA rank on q,k,v,o,gate,up,down (alpha 2 x rank), unmerged; 0: none")
      ->capture_default_str();
  roll->add_option("--lora-base", o.lora_base,
                   "The base under --lora: f32, bf16, int4 or nf4 (QLoRA), held as it loads")
      ->capture_default_str();
  return roll;
}

CLI::App* add_bench_cuda_command(CLI::App& bench, BenchCudaOptions& o) {
  auto* bcuda =
      bench.add_subcommand("cuda", "GPU: bf16 training MFU, decode tokens/s vs the bandwidth roofline, GEMM TFLOP/s");
  bcuda->add_option("--what", o.what, "train, decode, gemm or all")->capture_default_str();
  bcuda->add_option("--shape", o.shape, "Built-in shape with random weights")->capture_default_str();
  bcuda->add_option("--device", o.device, "CUDA device index")->capture_default_str();
  bcuda->add_option("--batch", o.batch, "train/gemm: sequences per step")->capture_default_str();
  bcuda->add_option("--seq", o.seq, "train/gemm: tokens per sequence")->capture_default_str();
  bcuda->add_option("--batches", o.batches, "decode: batch sizes, comma-separated")->capture_default_str();
  bcuda->add_option("--gen-len", o.gen_len, "decode: steps per batch")->capture_default_str();
  bcuda->add_option("--steps", o.steps, "train: timed steps")->capture_default_str();
  bcuda->add_option("--warmup", o.warmup, "train: untimed steps first")->capture_default_str();
  bcuda->add_option("--graph", o.graph, "decode: replay steps as CUDA graphs (true/false)")->capture_default_str();
  bcuda->add_option("--peak-tflops", o.peak_tflops, "Dense bf16 peak for MFU (default: from the device name)");
  return bcuda;
}

CLI::App* add_bench_roofline_command(CLI::App& bench, BenchRooflineOptions& o) {
  auto* roof = bench.add_subcommand(
      "roofline",
      "This machine's GEMM GFLOP/s per precision and memory bandwidth (docs/PERFORMANCE.md's denominators)");
  add_threads_option(roof, o.threads, "Threads (default: all cores, or TEMPER_THREADS)");
  roof->add_flag("--json", o.json, "Print only the JSON result line");
  roof->add_flag("--small", o.small, "Test sizes: square 256, 64 tokens, 64 MiB of memory, 2 repetitions");
  roof->add_option("--square", o.square, "M = N = K of the square product")->capture_default_str();
  roof->add_option("--tokens", o.tokens, "Rows (batch x seq) of the SmolLM2-135M training products")
      ->capture_default_str();
  roof->add_option("--memory-gib", o.memory_gib, "GiB the read-only sum reads (copy and triad: arrays of half)")
      ->capture_default_str();
  roof->add_option("--reps", o.reps, "Timed calls at least per measurement (the best is kept)")->capture_default_str();
  return roof;
}

// `temper bench dit`: the DiT's flow-matching training step (the peer: bench/peers/dit_step.py).
CLI::App* add_bench_dit_command(CLI::App& bench, BenchDitOptions& o) {
  auto* dit = bench.add_subcommand("dit", "DiT flow-matching training step (forward + backward + AdamW) images/s");
  dit->add_option("--image", o.image, "Image side S")->capture_default_str();
  dit->add_option("--channels", o.channels, "Image channels")->capture_default_str();
  dit->add_option("--patch", o.patch, "Patch side (S/patch)^2 tokens")->capture_default_str();
  dit->add_option("--hidden", o.hidden, "Token width")->capture_default_str();
  dit->add_option("--depth", o.depth, "Blocks")->capture_default_str();
  dit->add_option("--heads", o.heads, "Attention heads")->capture_default_str();
  dit->add_option("--mlp-ratio", o.mlp_ratio, "MLP width / hidden")->capture_default_str();
  dit->add_option("--classes", o.classes, "Class labels (plus the null label)")->capture_default_str();
  dit->add_option("--batch", o.batch, "Images per step")->capture_default_str();
  add_threads_option(dit, o.threads, "Threads (default: all cores, or TEMPER_THREADS)");
  dit->add_option("--dtype", o.dtype, "f32, or bf16 (bf16 products, f32 weights and AdamW state)")
      ->capture_default_str();
  dit->add_option("--steps", o.steps, "Timed steps")->capture_default_str();
  dit->add_option("--warmup", o.warmup, "Untimed steps first")->capture_default_str();
  dit->add_flag("--json", o.json, "Print only the JSON result line");
  dit->add_flag("--profile", o.profile, "Add seconds per step by phase to the JSON");
  return dit;
}

void add_bench_commands(CLI::App& app, std::vector<Command>& commands) {
  auto* bench = app.add_subcommand("bench", "Measure throughput");
  bench->require_subcommand(1);
  auto bt = std::make_shared<BenchTrainOptions>();
  commands.push_back({add_bench_train_command(*bench, *bt), [bt] { return bench_train(*bt); }});
  auto bl = std::make_shared<BenchLoadOptions>();
  commands.push_back({add_bench_load_command(*bench, *bl), [bl] { return bench_load(*bl); }});
  auto br = std::make_shared<BenchRolloutOptions>();
  commands.push_back({add_bench_rollout_command(*bench, *br),
                      [br] { return br->speculative ? bench_speculative(*br) : bench_rollout(*br); }});
  auto bc = std::make_shared<BenchCudaOptions>();
  commands.push_back({add_bench_cuda_command(*bench, *bc), [bc] { return bench_cuda(*bc); }});
  auto bf = std::make_shared<BenchRooflineOptions>();
  commands.push_back({add_bench_roofline_command(*bench, *bf), [bf] { return bench_roofline(*bf); }});
  auto bd = std::make_shared<BenchDitOptions>();
  commands.push_back({add_bench_dit_command(*bench, *bd), [bd] { return bench_dit(*bd); }});
}

}  // namespace temper::app
