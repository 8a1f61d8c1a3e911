// `temper info [MODEL]`: what temper sees of a model (config, parameter count) and of this machine (ISAs,
// threads, GEMM backend), and the memory plan of training it (app/memory_plan.h): per component and rank, from
// the config alone (nothing allocated), against a device's memory, with the largest micro-batch that fits.
#pragma once

#include <cstdint>
#include <string>

namespace temper::app {

struct InfoOptions {
  std::string model;
  // The plan's settings (memory_plan.h's MemorySettings).
  std::string device = "cpu";
  double device_memory_gib = 0;  // > 0: plan for this much device memory instead of the one found here
  std::string precision = "f32";
  bool recompute = false;
  int64_t batch = 8;  // sequences per micro-batch
  int64_t seq = 0;    // tokens per sequence (0: min(1024, the model's context))
  int64_t ranks = 1;
  bool zero = false;                                                      // ZeRO-1 (run.shard_optimizer)
  bool zero2 = false;                                                     // ZeRO-2 (run.shard_gradients; implies zero)
  int64_t prompts = 8, group = 8, max_new = 0, max_seqs = 64, kv_mb = 0;  // rollouts (max_new > 0)
  bool kl = false;                                                        // a KL reference
  bool eval = false;  // temper train's held-out evaluation (its decode copy and KV cache of kv_mb or 256 MiB)
  int64_t lora = 0;
  bool qlora = false;     // --lora-base int4
  std::string lora_base;  // the base under --lora: f32, bf16, int4 or nf4 (empty: bf16, or int4 with --qlora)
  std::string teacher;    // a teacher model (config.json, HF directory or GGUF)
  bool json = false;      // the plan as one JSON object (nothing else)
};

int info(const InfoOptions& o);

}  // namespace temper::app
