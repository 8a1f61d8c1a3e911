// temper train's memory check: the run's settings as the memory plan's (app/memory_plan.h), the plan printed
// (rank 0), and a run that cannot fit this machine's memory (CUDA: the device's) refused before anything is
// reserved, with the plan and the settings that would make it fit. TEMPER_MEMORY_PLAN=warn turns the refusal
// into a warning (a plan is an estimate; tests/e2e/memory_plan_rss.sh holds it within 10% of the peak RSS).
#pragma once

#include <cstdint>
#include <string>

#include "temper/app/run_config.h"
#include "temper/kernels/matmul.h"
#include "temper/model/config.h"
#include "temper/model/lora.h"

namespace temper::app {

struct RunMemoryFacts {
  std::string device = "cpu";  // the policy's (cuda:N for a data-parallel rank)
  kernels::Precision precision = kernels::Precision::f32;
  int64_t tokens = 1, seq = 1;  // the largest micro-batch's tokens and sequence length (the arena plan())
  int ranks = 1, local_ranks = 1;
  bool reference = false;              // a frozen KL reference copy is kept
  int64_t eval_prompt = 0;             // tokens of the longest held-out prompt (0: not known)
  const LoraAdapters* lora = nullptr;  // [lora]
  bool print = true;                   // rank 0 prints the plan
  std::string source;                  // the recipe, for the refusal
};

void check_run_memory(const RunConfig& cfg, const ModelConfig& mc, const RunMemoryFacts& f);

}  // namespace temper::app
