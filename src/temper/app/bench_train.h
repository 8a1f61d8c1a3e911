// `temper bench train`: forward + backward + AdamW throughput of the training step on a built-in
// shape or a Hugging Face model directory, random tokens, printed as one JSON line (the fields
// bench/peers/torch_train.py prints too, so `make bench` can compare them side by side). With --lora R the
// step trains LoRA adapters on q, k, v, o, gate, up, down over a frozen base kept f32, bf16 or int4 (QLoRA; held as
// it loads), and the JSON adds the load's peak RSS. Under mpirun each rank trains its block of the batch
// (data-parallel, the gradients summed over ranks), with --zero 1 / 2 sharded (ZeRO-1 / ZeRO-2), and prints its own
// line (its peak RSS).
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct BenchTrainOptions {
  std::string shape = "smollm2-135m";
  std::string model_dir;  // overrides shape: config.json (+ model.safetensors when present)
  int64_t batch = 8, seq = 256;
  int threads = 0;  // 0: default
  std::string dtype = "f32";
  int steps = 3, warmup = 1;
  int64_t micro_batch = 0;
  bool recompute = false;
  bool json = false;
  bool profile = false;
  bool quick = false;  // tiny shape, small batch: a smoke run of the whole step
  bool print_config = false;   // print the shape's config.json (io::hf_config_json) instead of running
  std::string device = "cpu";  // cpu, cuda[:N], mirror: the step's passes and the optimizer on that device
  int64_t lora = 0;            // LoRA rank (alpha 2 x rank) on all seven products; 0: full fine-tuning
  std::string lora_base = "f32";  // the frozen base under the adapters: f32, bf16, int4 or nf4 (Transformer::hold_base)
  int zero = 0;                   // under mpirun: 1 shards the AdamW moments (ZeRO-1), 2 the gradients too (ZeRO-2)
};

int bench_train(BenchTrainOptions o);

}  // namespace temper::app
