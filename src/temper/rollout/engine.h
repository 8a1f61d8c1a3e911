// The rollout engine: batched generation on the trainer's own weights over the paged KV cache.
// Each request is a prompt with G samples: the prompt is prefilled once and its blocks shared by the
// G members (fork). Continuous batching: every step is one forward over the new tokens of all live
// sequences (prefills of newly admitted requests mixed with decodes); finished sequences leave and
// queued requests join when the pool has room. Every generated token records its id, the log-prob
// under the sampling distribution, and the log-prob and full-vocabulary entropy under the policy
// itself (temperature 1, no truncation). Member g of a request draws from the Philox stream
// (seed, stream + g): its tokens do not depend on what else shares the batch.
// Leaves out (later): speculative decoding, preemption with recompute, the JSONL CLI, bf16 weights.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rollout/sampler.h"

namespace temper::rollout {

enum class FinishReason { stop, length, hook };
std::string finish_reason_name(FinishReason r);

struct RolloutRequest {
  std::vector<int32_t> prompt;
  int64_t group_size = 1;  // G samples sharing the prompt
  int64_t max_new = 64;
  SamplerConfig sampler;
  std::set<int32_t> stop_ids;
  uint64_t seed = 0;
  uint64_t stream = 0;  // member g draws from Philox stream (seed, stream + g)
};

struct Completion {
  int64_t request = 0, member = 0;
  std::vector<int32_t> tokens;
  std::vector<float> sample_logprob;  // under the distribution actually sampled from
  std::vector<float> policy_logprob;  // under the unmodified policy (temperature 1, full vocabulary)
  std::vector<float> entropy;         // full-vocabulary entropy of the policy at each step
  FinishReason finish = FinishReason::length;
};

// Called after each decode step for every sequence that produced a token; may stop it.
class RolloutHook {
 public:
  virtual ~RolloutHook() = default;
  // Return true to stop this sequence now (finish reason `hook`).
  virtual bool after_token(const RolloutRequest& req, const Completion& c) = 0;
};

// The shipped hook: stop when a predicate on the decoded text so far is true.
class StopWhenText : public RolloutHook {
 public:
  StopWhenText(std::function<std::string(const std::vector<int32_t>&)> decode,
               std::function<bool(const std::string&)> predicate)
      : decode_(std::move(decode)), pred_(std::move(predicate)) {}
  bool after_token(const RolloutRequest&, const Completion& c) override { return pred_(decode_(c.tokens)); }

 private:
  std::function<std::string(const std::vector<int32_t>&)> decode_;
  std::function<bool(const std::string&)> pred_;
};

struct EngineConfig {
  int64_t max_seqs = 64;  // live sequences at once
};

class RolloutEngine {
 public:
  RolloutEngine(Transformer& model, KvPool& pool, EngineConfig cfg = {});
  // Completions in (request, member) order.
  std::vector<Completion> run(const std::vector<RolloutRequest>& requests, RolloutHook* hook = nullptr);

 private:
  Transformer& model_;
  KvPool& pool_;
  EngineConfig cfg_;
};

}  // namespace temper::rollout
