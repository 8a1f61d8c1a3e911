// The rollout engine: batched generation on the trainer's own weights over the paged KV cache, with
// continuous batching, recompute preemption (as vLLM's), per-member Philox streams, hooks that stop or
// fork sequences, and speculative decoding (EfficientRollout) when configured. The behaviour in detail:
// above RolloutEngine; the steps of one run() call: EngineRun (rollout/engine_run.h).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rollout/sampler.h"
#include "temper/rollout/spec_control.h"

namespace temper {
class ActivationStore;
class Int4Drafter;
}  // namespace temper

namespace temper::rollout {

class RunDriver;

enum class FinishReason { stop, length, hook };
std::string finish_reason_name(FinishReason r);

struct RolloutRequest {
  std::vector<int32_t> prompt;
  int64_t group_size = 1;  // G samples sharing the prompt
  int64_t max_new = 64;
  SamplerConfig sampler;
  std::set<int32_t> stop_ids;
  std::vector<std::string> stop_strings;  // matched on the completion's bytes (EngineConfig::token_bytes)
  uint64_t seed = 0;
  uint64_t stream = 0;  // member g draws from Philox stream (seed, stream + g)
  // Tokens every member emits first instead of sampling (teacher forcing, e.g. a forced close of a
  // thinking block); they are recorded like sampled ones with sample_logprob = the policy's.
  std::vector<int32_t> forced;
  // Keep the activations of every token the policy forwards for this request in the engine's
  // ActivationStore (EngineConfig::store), for an update that skips its forward (Completion::act_slots).
  bool keep_activations = false;
  // > 0: each turn ends (reason length) after this many generated tokens, below max_new (the whole
  // completion's cap); a RunDriver may continue the sequence (rollout/run_driver.h).
  int64_t turn_max_new = 0;
};

// A request for `prompt`: group_size samples of at most max_new tokens, cut so that prompt + completion fit
// `context`, with the sampler and stop ids; member g draws from Philox (seed, stream + g).
RolloutRequest make_request(std::vector<int32_t> prompt, int64_t group_size, int64_t max_new, int64_t context,
                            const SamplerConfig& sampler, const std::set<int32_t>& stop_ids, uint64_t seed,
                            uint64_t stream);

struct Completion {
  int64_t request = 0, member = 0;
  int64_t parent = -1;     // forks: the member it was forked from (-1: one of the G originals)
  int64_t fork_pos = 0;    // forks: tokens [0, fork_pos) are the parent's
  int64_t forced = 0;      // tokens [forced_pos, forced_pos + forced) were forced, not sampled
  int64_t forced_pos = 0;  // (a request's forced tokens start at 0, a fork's at fork_pos)
  uint64_t stream = 0;     // the Philox stream it drew from
  std::vector<int32_t> tokens;
  std::vector<float> sample_logprob;  // under the distribution actually sampled from
  std::vector<float> policy_logprob;  // under the unmodified policy (temperature 1, full vocabulary)
  std::vector<float> entropy;         // full-vocabulary entropy of the policy at each step
  FinishReason finish = FinishReason::length;
  int32_t stop_string = -1;  // index into the request's stop_strings when one ended it
  // keep_activations: act_slots[p] is the store slot of the activations of the token at position p of
  // prompt + completion when it was last forwarded (-1: not kept, e.g. the store was full). The last
  // completion token is never forwarded; entries past it may be stale (the slot tags tell).
  std::vector<int64_t> act_slots;
  // Multi-turn (RunDriver): tokens [first, first + count) were appended by the driver (an environment's
  // observation): recorded, not sampled; their three per-token fields are 0.
  std::vector<std::pair<int64_t, int64_t>> appended;
};

// What a hook wants done with a sequence after seeing its newest token.
struct HookDecision {
  bool stop = false;  // finish now (reason `hook`)
  int32_t forks = 0;  // new sequences branching here: they share everything so far, then draw on their own
  std::vector<int32_t> fork_forced;  // each fork emits these first (forced, then sampled)
  int64_t fork_max_new = 0;          // > 0: a fork ends after this many tokens past the fork point (forced included)
};

class RolloutHook {
 public:
  virtual ~RolloutHook() = default;
  // Called for every sequence that produced a token in a step (before its stop checks).
  virtual HookDecision after_token(const RolloutRequest& req, const Completion& c) = 0;
  // Called once after every step (all sequences' tokens of that step seen).
  virtual void after_step(int64_t step) {}
};

// The shipped hook: stop when a predicate on the decoded text so far is true.
class StopWhenText : public RolloutHook {
 public:
  StopWhenText(std::function<std::string(const std::vector<int32_t>&)> decode,
               std::function<bool(const std::string&)> predicate)
      : decode_(std::move(decode)), pred_(std::move(predicate)) {}
  HookDecision after_token(const RolloutRequest&, const Completion& c) override {
    HookDecision d;
    d.stop = pred_(decode_(c.tokens));
    return d;
  }

 private:
  std::function<std::string(const std::vector<int32_t>&)> decode_;
  std::function<bool(const std::string&)> pred_;
};

struct EngineConfig {
  int64_t max_seqs = 64;  // live sequences at once
  // Prefill tokens admitted per step (bounds the activation arena); a prompt longer than this is
  // still admitted alone. Prompts are not split across steps (chunked prefill: later).
  int64_t max_step_tokens = 4096;
  // Bytes of a token (Tokenizer::token_bytes); needed when a request has stop strings.
  std::function<std::string_view(int32_t)> token_bytes;
  // Speculative decoding: both set (the drafter refreshed by its owner after each weight update).
  const Int4Drafter* drafter = nullptr;
  SpecController* spec = nullptr;
  // Called when a run turns speculation on, before the drafter's first pass: an owner that refreshes
  // the drafter lazily does it here (then the drafter need not be ready before the run).
  std::function<void()> on_spec_start;
  // Where requests with keep_activations keep them (a CPU model only; the owner resets it).
  ActivationStore* store = nullptr;
  // Profile (core/profile.h) only the steps that decode and nothing else: a step with prompt or recomputed rows runs
  // with the profiler muted (bench rollout's per-decode-step phases; EngineStats::decode_only_steps counts the rest).
  bool profile_decode_only = false;
  EngineConfig() = default;
  EngineConfig(int64_t seqs, std::function<std::string_view(int32_t)> bytes = {})
      : max_seqs(seqs), token_bytes(std::move(bytes)) {}
};

struct EngineStats {
  int64_t steps = 0, prefill_tokens = 0, decode_tokens = 0, preemptions = 0, recomputed_tokens = 0, forks = 0;
  int64_t kv_blocks_dropped = 0;  // blocks freed behind a sliding window (models whose every layer slides)
  // Plain steps whose rows were all decode rows (no prompt, no recompute): their count, tokens and wall-clock seconds
  // (the steady decode rate, without the ramp of steps that also prefill).
  int64_t decode_only_steps = 0, decode_only_tokens = 0;
  double decode_only_s = 0;
  // Multi-turn (RunDriver): turns continued, tokens appended to them, waiting sequences (parked, or continued and
  // queued) whose KV was freed to make room.
  int64_t turns_continued = 0, appended_tokens = 0, parked_evictions = 0;
  // Speculative decoding: the step it turned on at (-1: never), verify cycles (one per sequence and
  // cycle with drafts), tokens drafted and accepted.
  int64_t spec_from_step = -1, spec_steps = 0, spec_cycles = 0, drafted = 0, accepted = 0;
  double draft_s = 0, verify_s = 0,
         accept_s = 0;  // seconds in the draft passes (forwards and sampling), the verify forward, the acceptance
};

// Each request is a prompt with G samples: the prompt is prefilled once and its blocks shared by the
// G members (fork). Continuous batching: every step is one forward over the new tokens of all live
// sequences (prefills of newly admitted requests mixed with decodes); finished sequences leave and
// queued requests join when the pool has room. When the pool runs out mid-decode, the newest
// sequences are preempted (their blocks freed) and later resumed by recomputing their prefix, as
// vLLM's recompute preemption. Every generated token records its id, the log-prob under the
// sampling distribution, and the log-prob and full-vocabulary entropy under the policy itself
// (temperature 1, no truncation). Member g of a request draws from the Philox stream
// (seed, stream + g); a fork draws from a stream derived from its parent's: a sequence's tokens do
// not depend on what else shares the batch. Hooks see every new token and may stop a sequence or
// fork it at the current position. Speculative decoding (EfficientRollout) when the config has a
// drafter and a controller: once the controller turns it on for a rollout, every cycle drafts up
// to gamma tokens per live sequence with the 4-bit drafter over the shared KV cache, the policy
// scores all of them in one batched forward, and the standard rejection rule keeps the emitted
// tokens distributed exactly as plain sampling (rollout/spec_sampling.h); recorded log-probs and
// entropies are the policy's, from the verify pass. Hooks, stops and forks see every token as before.
class RolloutEngine {
 public:
  RolloutEngine(Transformer& model, KvPool& pool, EngineConfig cfg = {});
  // Completions in (request, member) order; a request's forks follow its G members in creation order.
  // A driver adds requests while the run goes on and continues sequences whose turn ended
  // (rollout/run_driver.h).
  std::vector<Completion> run(const std::vector<RolloutRequest>& requests, RolloutHook* hook = nullptr,
                              RunDriver* driver = nullptr);
  const EngineStats& stats() const { return stats_; }  // of the last run
  const EngineConfig& config() const { return cfg_; }
  Transformer& model() { return model_; }  // a second engine on the same model and pool (serve's, between runs)
  KvPool& pool() { return pool_; }
  void set_speculative(const Int4Drafter* drafter, SpecController* spec, std::function<void()> on_start = {}) {
    cfg_.drafter = drafter;
    cfg_.spec = spec;
    cfg_.on_spec_start = std::move(on_start);
  }
  void set_activation_store(ActivationStore* store) { cfg_.store = store; }

 private:
  Transformer& model_;
  KvPool& pool_;
  EngineConfig cfg_;
  EngineStats stats_;
};

// The Philox stream of the k-th fork (k >= 1) of a sequence drawing from `parent`.
uint64_t fork_stream(uint64_t parent, int64_t k);

}  // namespace temper::rollout
