// `temper bench train`: forward + backward + AdamW throughput of the training step on a built-in
// shape or a Hugging Face model directory, random tokens, printed as one JSON line (the fields
// bench/peers/torch_train.py prints too, so `make bench` can compare them side by side).
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
};

int bench_train(BenchTrainOptions o);

}  // namespace temper::app
