// RolloutEngine (engine.h): the engine object, finish reasons and fork streams. One run() call is an
// EngineRun (engine_run.h): its steps live in engine_run.cpp (plain step) and engine_speculative.cpp.
#include "temper/rollout/engine.h"

#include <algorithm>

#include "temper/core/error.h"
#include "temper/rollout/engine_run.h"

namespace temper::rollout {

std::string finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::hook:
      return "hook";
  }
  return "?";
}

uint64_t fork_stream(uint64_t parent, int64_t k) {  // splitmix64 finaliser of (parent, k)
  uint64_t z =
      parent * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(k) * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

RolloutRequest make_request(std::vector<int32_t> prompt, int64_t group_size, int64_t max_new, int64_t context,
                            const SamplerConfig& sampler, const std::set<int32_t>& stop_ids, uint64_t seed,
                            uint64_t stream) {
  RolloutRequest r;
  r.prompt = std::move(prompt);
  r.group_size = group_size;
  r.max_new = std::min<int64_t>(max_new, context - static_cast<int64_t>(r.prompt.size()));
  r.sampler = sampler;
  r.stop_ids = stop_ids;
  r.seed = seed;
  r.stream = stream;
  return r;
}

RolloutEngine::RolloutEngine(Transformer& model, KvPool& pool, EngineConfig cfg)
    : model_(model), pool_(pool), cfg_(cfg) {
  TEMPER_CHECK(cfg_.max_seqs > 0) << "rollout engine: max_seqs must be > 0";
  TEMPER_CHECK(cfg_.max_step_tokens > 0) << "rollout engine: max_step_tokens must be > 0";
}

std::vector<Completion> RolloutEngine::run(const std::vector<RolloutRequest>& requests, RolloutHook* hook,
                                           RunDriver* driver) {
  stats_ = {};
  return EngineRun(model_, pool_, cfg_, stats_, requests, hook, driver).run();
}

}  // namespace temper::rollout
