#include "temper/rollout/pooled_engine.h"

#include "temper/core/error.h"

namespace temper::rollout {

namespace {

// Blocks of kKvBlockSize positions that `kv_memory_mb` holds for `model`; throws naming `budget_key` (the recipe
// key, e.g. "rl.kv_memory_mb") when it holds none.
int64_t kv_blocks_for(const Transformer& model, int64_t kv_memory_mb, const std::string& budget_key) {
  const int64_t blocks = KvPool::blocks_for_budget(
      model.config(), kKvBlockSize, static_cast<size_t>(kv_memory_mb) << 20, kv_dtype(model.precision()));
  TEMPER_CHECK(blocks > 0) << budget_key << " = " << kv_memory_mb << " holds no KV block of this model";
  return blocks;
}

}  // namespace

PooledEngine::PooledEngine(Transformer& model, int64_t kv_memory_mb, EngineConfig cfg, const std::string& budget_key)
    : pool_(model.config(), kKvBlockSize, kv_blocks_for(model, kv_memory_mb, budget_key), kv_dtype(model.precision())),
      engine_(model, pool_, std::move(cfg)) {}

}  // namespace temper::rollout
