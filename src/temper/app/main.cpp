// The temper command line: subcommands over the library. Catches temper::Error at the top, prints
// it, and exits non-zero. Later issues add train, generate, eval, convert, report and serve.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "temper/app/bench_train.h"
#include "temper/app/convert.h"
#include "temper/app/logits.h"
#include "temper/app/info.h"
#include "temper/core/error.h"
#include "temper/version.h"

int main(int argc, char** argv) {
  CLI::App app{"temper: reinforcement-learning post-training of language models"};
  app.set_version_flag("--version", std::string("temper ") + TEMPER_VERSION);
  app.require_subcommand(1);

  auto* bench = app.add_subcommand("bench", "Measure throughput");
  bench->require_subcommand(1);
  temper::app::BenchTrainOptions bt;
  auto* train = bench->add_subcommand("train", "Forward + backward + AdamW tokens/s of the training step");
  auto* shape_opt = train->add_option("--shape", bt.shape, "Built-in shape: smollm2-135m, tiny");
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

  temper::app::InfoOptions io;
  auto* info = app.add_subcommand("info", "Describe a model (HF directory or config.json) and this machine");
  info->add_option("model", io.model, "Model directory or config.json (optional)");

  temper::app::ConvertOptions co;
  auto* conv = app.add_subcommand("convert", "Convert a model between a Hugging Face directory and GGUF");
  conv->add_option("in", co.in, "Input model (Hugging Face directory or .gguf)")->required();
  conv->add_option("out", co.out, "Output: a directory (Hugging Face) or a path ending in .gguf")->required();
  conv->add_option("--dtype", co.dtype, "Weights of the output: HF f32 (default), bf16, f16; GGUF f16 (default), f32, bf16, q8_0");

  temper::app::LogitsOptions lo;
  auto* lg = app.add_subcommand("logits", "One forward pass over token ids, printed as JSON (top-1 per position)");
  lg->add_option("--model", lo.model, "Model (Hugging Face directory or .gguf)")->required();
  lg->add_option("--ids", lo.ids, "Comma-separated token ids")->required();
  lg->add_flag("--full", lo.full, "Also print every logit of every position");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (train->parsed()) return temper::app::bench_train(bt);
    if (info->parsed()) return temper::app::info(io);
    if (conv->parsed()) return temper::app::convert(co);
    if (lg->parsed()) return temper::app::logits(lo);
  } catch (const temper::Error& e) {
    std::fprintf(stderr, "temper: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "temper: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
