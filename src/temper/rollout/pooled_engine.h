// A rollout engine with its own paged KV cache sized from a memory budget (kKvBlockSize positions a block, rows
// in the model's KV dtype: bf16 for a bf16 model, twice the sequences per MB): what the RL trainer, evaluation and
// a teacher model each run. Pools sized by sequence counts instead (generate, the benchmarks) build their own.
#pragma once

#include <string>

#include "temper/model/kv_pool.h"
#include "temper/rollout/engine.h"

namespace temper::rollout {

class PooledEngine {
 public:
  // Throws naming `budget_key` (the recipe key, e.g. "rl.kv_memory_mb") when kv_memory_mb holds no block.
  PooledEngine(Transformer& model, int64_t kv_memory_mb, EngineConfig cfg, const std::string& budget_key);
  KvPool& pool() { return pool_; }
  RolloutEngine& engine() { return engine_; }

 private:
  KvPool pool_;
  RolloutEngine engine_;
};

}  // namespace temper::rollout
