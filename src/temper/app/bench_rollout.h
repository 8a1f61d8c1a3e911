// `temper bench rollout`: batched generation throughput of the rollout engine (prefill and decode
// tokens/s, peak memory) on a built-in shape with random weights or a model, and the machine's
// measured memory read bandwidth with the decode bound it implies at batch 1. One JSON line.
// With --group G: B prompts x G samples sharing each prompt's prefill, and the prefill work (tokens
// computed, seconds) against the same B x G sequences as independent requests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "temper/app/model_source.h"
#include "temper/model/lora.h"

namespace temper::app {

struct BenchRolloutOptions {
  std::string shape = "smollm2-135m", model;
  int64_t batch = 1, prompt_len = 64, gen_len = 64;
  int64_t group = 1;  // G samples per prompt sharing its prefill: batch x G sequences
  int threads = 0;
  std::string dtype = "f32";
  bool json = false;
  bool profile = false;  // milliseconds per decode step by phase
  // --speculative (app/bench_speculative.h)
  bool speculative = false;
  std::string batches = "1,2,4,8,16,32,64";
  int64_t gamma = 5;
  int64_t drafter_group = 128;
  std::string drafter_head = "bf16";
  int64_t drafter_vocab = 0;  // the drafter head's vocabulary subset (0: all), ranked by a plain run's tokens
  float temperature = 1.0f;
  std::string device = "cpu";  // cpu, cuda[:N], mirror: the model's forward on that device (the drafter's too)
  // --lora R: adapters of rank R on q,k,v,o,gate,up,down (alpha 2 x R), not merged, over a base held as lora_base
  // (f32, bf16, int4 or nf4: Transformer::plan_held_base, as it loads). CPU only.
  int64_t lora = 0;
  std::string lora_base = "f32";
};

int bench_rollout(const BenchRolloutOptions& o);

// The benchmark's model: --model loaded into `lm`, else the --shape preset with random weights in `owned`;
// precision from --dtype; with --lora its adapters in `lora` (refused where that is null).
Transformer& open_bench_model(const BenchRolloutOptions& o, std::unique_ptr<Transformer>& owned, LoadedModel& lm,
                              std::unique_ptr<LoraAdapters>* lora = nullptr);

}  // namespace temper::app
