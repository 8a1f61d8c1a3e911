// temper train's memory check: the run's settings as the memory plan's (app/memory_plan.h), the plan printed
// (rank 0), and a run that cannot fit this machine's memory (CUDA: the device's) refused before anything is
// reserved, with the plan and the settings that would make it fit. TEMPER_MEMORY_PLAN=warn turns the refusal
// into a warning (a plan is an estimate; tests/e2e/memory_plan_rss.sh holds it within 10% of the peak RSS).
#pragma once

#include <cstdint>
#include <string>

#include "temper/app/memory_plan.h"
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

// The KV blocks the evaluation writes (s.eval_seqs, s.eval_seq): at most eval.max_seqs sequences at once of the
// longest held-out prompt and eval.max_new tokens. Left at 0 (the whole pool) where the prompts the evaluation sends
// are longer than the scan measured: sequential revisions (each round appends the attempt), [fair]'s preference
// prefix (evaluate.cpp conditions every prompt), a held-out stream past the rows scan_inputs measured (f.eval_prompt
// 0).
void evaluation_sequences(const RunConfig& cfg, const ModelConfig& mc, const RunMemoryFacts& f, MemorySettings& s);

}  // namespace temper::app
