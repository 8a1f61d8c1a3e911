// The GRPO-family RL step on the trainer's own weights: draw prompts, roll out G samples each with the
// rollout engine, score them with the run's reward (rl/reward_set.h; never fatal), optionally drop groups
// whose rewards are all equal and draw more (DAPO dynamic sampling), compute advantages, let methods
// reweight, then update (policy_update.h). Randomness is derived from (seed, step), so a resumed run draws
// exactly what an uninterrupted one would. Leaves out the update's loops (policy_update.h), the passes lent to
// methods (scorer.h), speculative rollouts (speculative_rollouts.h) and kept activations (kept_activations.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "temper/dist/communicator.h"
#include "temper/model/optimizer.h"
#include "temper/model/transformer.h"
#include "temper/reward/safe_reward.h"
#include "temper/rl/advantages.h"
#include "temper/rl/async_config.h"
#include "temper/rl/async_explorer.h"
#include "temper/rl/async_state.h"
#include "temper/rl/batch.h"
#include "temper/rl/env_rollout.h"
#include "temper/rl/kept_activations.h"
#include "temper/rl/method.h"
#include "temper/rl/policy_loss.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rl/reward_set.h"
#include "temper/rl/scorer.h"
#include "temper/rl/speculative_rollouts.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/pooled_engine.h"
#include "temper/spotlight/explorer_pool.h"

namespace temper::rl {

struct RlConfig {
  int64_t prompts_per_step = 8;
  int64_t group_size = 8;  // G
  int64_t max_new = 64;
  int64_t max_prompt_tokens = 0;  // training prompts longer are refused before the first step (0: the context)
  rollout::SamplerConfig sampler;
  AdvantageConfig advantage;
  PolicyLossConfig loss;
  int64_t epochs = 1;        // passes over each rollout batch
  int64_t mini_batches = 1;  // optimiser steps per epoch
  // Sequences per forward/backward (gradient accumulation), sorted by length and each cut to its longest row;
  // 0: the whole mini-batch at once. 8 keeps a small model's activations near the cache and drops most padding
  // (quickstart update 11-14% faster than 0, docs/PERFORMANCE.md "RL step vs TRL").
  int64_t micro_batch = 8;
  // Rows of a micro-batch with equal prompts hold the prompt once in the update's forward and backward
  // (PackedRows; no padding either); the padded rows when false or on a device.
  bool share_prompts = true;
  // The update's first optimizer step takes the rollout's activations instead of a forward where they
  // were kept (packed rows on the CPU; model/activation_store.h), up to this much memory for them
  // (0: a quarter of the machine's physical memory). Requests whose worst case does not fit run the forward.
  bool reuse_activations = true;
  int64_t reuse_activations_mb = 0;
  bool dynamic_sampling = false;
  int64_t max_resample_rounds = 3;
  bool mask_truncated = false;  // DAPO overlong masking: completions cut at max_new are left out of the loss
  uint64_t seed = 0;
  int64_t kv_memory_mb = 256;
  int64_t max_seqs = 64;
  std::optional<SpeculativeConfig> speculative;  // [rl.speculative]: its own section
  std::optional<AsyncConfig> async;              // [rl.async]: its own section
  OptimizerConfig optimizer{.adamw = {.weight_decay = 0.0f}, .lr = {.peak = 1e-5, .min_ratio = 1.0}};
  void validate() const;
  void visit(KeyVisitor& v);  // [rl] (steps and schedule are the run's)
};

// The rollout engine's settings of an RL run (the trainer's engine and its explorers'): at most a step's sequences.
rollout::EngineConfig rollout_engine_config(const RlConfig& c, std::function<std::string_view(int32_t)> token_bytes);

// Data-parallel (set_communicator with several ranks): every rank draws the same prompts and builds
// the same requests; rank r rolls out a block of the requests (rollout::run_sharded) and scores
// trajectories r, r+N, ...; completions and verdicts are all-gathered, so every rank holds the
// one-process batch in the one-process order (advantages, methods' batch-wide statistics, dynamic sampling
// and metrics are computed identically everywhere, method state stays in step). In the update each rank
// computes reference log-probs for its block of rows and gradients for its block of each mini-batch's
// group-ordered rows (every N-th row after a length sort without rl.share_prompts), scaled by the whole
// mini-batch's normalisers; the optimiser sums gradients over ranks, so every rank applies the update one
// process would (up to float summation order). Sampling streams are derived from (seed, step, round, global
// request index): a sample does not depend on which rank drew it.
// [rl.async] (async_config.h) with max_staleness = s > 0, one process: at the start of step k the trainer's thread
// draws step k + s's problems (methods' extra and rewritten problems included), copies its weights (version k)
// into the explorer's snapshot and hands the requests to the explorer's thread (async_explorer.h), which rolls
// them out while this step scores, updates and reports; step k trains on the batch launched at step k - s,
// sampled with version max(k - s, 0) (the first s batches with version 0, in turn). Everything else (methods'
// hooks, scoring, dynamic sampling's extra rounds, which roll out on the current weights) stays on the trainer's
// thread. The schedule never depends on timing: a rerun gives the same bits, whatever the thread split. The
// update corrects the staleness (decoupled PPO with the proximal policy the trainer's at the step start, times
// min(pi_prox / pi_behaviour, tis_cap)): with one optimiser step per batch and no methods inside the loss
// (PolicyLossConfig::behaviour_cap), otherwise through a log-prob pass of the current weights before the methods'
// advantage and weight hooks (old_logprob := pi_prox, weight *= the truncated ratio). With LoRA the explorer rolls
// out the frozen base (shared, not copied) with the version's adapters. With [env] (set_environment) the explorer's
// job is step k + s's conversations (ConversationSource::run on its engine: same seeds and episode names as the
// synchronous loop's), their trajectories kept, scored, with the batch; the source is never used by two threads at
// once (dynamic sampling's extra rounds converse on the trainer's thread after the explorer's conversation ends;
// held-out evaluation does not run with [env]); on explorer ranks the explorer rank converses through its own source
// (async_remote.h); explorer processes the trainer starts roll out blocks of each batch from a pull queue and survive
// kills (async_processes.h). Refused: rollout hooks, [rl.speculative], devices, several ranks beside an explorer
// thread, [env] with several explorer ranks or with explorer processes.

class RlTrainer {
 public:
  // reference: frozen weights of the policy as RL starts: the KL term's (required when loss.kl_coef > 0) and
  // what methods read as the starting policy (MethodEnv::score_batch with initial, embed); else null.
  RlTrainer(Transformer& policy, std::shared_ptr<const tasks::Task> task, PromptCodec codec, RlConfig cfg,
            std::shared_ptr<RewardSet> rewards, std::vector<Method*> methods = {}, Transformer* reference = nullptr);
  // The task's verifier alone as the reward.
  RlTrainer(Transformer& policy, std::shared_ptr<const tasks::Task> task, PromptCodec codec, RlConfig cfg,
            reward::SafeReward& safe, std::vector<Method*> methods = {}, Transformer* reference = nullptr);
  Metrics step();  // one RL step; returns its metrics
  const Batch& last_batch() const { return batch_; }
  // [rl.async] with an explorer thread: the threads this (the trainer's) thread may use now, its share while the
  // explorer generates beside it and all of them while the explorer waits (a moving ThreadLimit's count): what
  // step() runs under, and work between steps must too (held-out evaluation). Null otherwise.
  const std::atomic<int>* trainer_threads() const { return async() ? explorer_->trainer_threads() : nullptr; }

  int64_t steps_done() const { return step_; }
  uint64_t cursor() const { return cursor_; }  // problems drawn from the task so far
  Optimizer& optimizer() { return opt_; }
  void restore(int64_t steps_done, uint64_t cursor) { step_ = steps_done, cursor_ = cursor; }
  // Speculative decoding's controller state and cost model (for checkpoints; empty without it).
  std::string speculative_state() const;
  void load_speculative_state(const std::string& s);
  // [rl.async]: the batches explored ahead, as checkpoint text (waits for the explorer's job in flight; empty
  // without [rl.async]), and their restore (before the first step).
  std::string async_state();
  void load_async_state(const std::string& s);
  // [rl.async]: no batch is explored for steps at or past `steps` (the run's last step; -1: no limit).
  void set_planned_steps(int64_t steps) { planned_steps_ = steps; }
  // The process group (null or one rank: one process). Set before the first step.
  // Multi-turn rollouts against an environment instead of single completions (one trainer process; the trainer's
  // methods must work on conversations: RunConfig refuses the others). Set before the first step; on an explorer
  // rank, before serve_explorer (its conversation jobs converse through it).
  void set_environment(std::unique_ptr<ConversationSource> env);
  // A stop request (core/interrupt.h) abandons the step's rollouts (Interrupted out of step(), before the
  // update: the weights, optimiser and step count are as before the step). Off by default, and for a
  // data-parallel rank (its peers wait for it in the step's collectives).
  void set_interruptible(bool on) { interruptible_ = on; }
  void set_communicator(dist::Communicator* comm);
  // [rl.async] with explorer ranks (async_remote.h), before the first step. A trainer rank: the explorer thread
  // gives way to the ranks from `first_explorer` on of `world`, and `trainers` becomes the process group. An
  // explorer rank: serve_explorer() rolls out the trainers' jobs on this trainer's policy and engine ([env]: converses
  // through this trainer's environment) until they stop (it never steps).
  void use_explorer_ranks(dist::Communicator& world, dist::Communicator& trainers, int first_explorer);
  void serve_explorer(dist::Communicator& world);
  // [rl.async] with explorer processes (async_processes.h): starts them with `cmd` (the program and its setup
  // message), before the first step; the trainer's thread keeps rl.async.trainer_threads (or its share).
  void use_explorer_processes(spotlight::ExplorerCommand cmd);

 private:
  void lend_methods();  // MethodEnv to every method
  void begin_step();
  void check_async() const;
  void explore_ahead();  // [rl.async]: this step's batch in, step + max_staleness's launched
  void launch_explorer(int64_t step);
  void collect_explored();  // the explorer's job in flight, into explored_.back()
  void take_explored(std::vector<Trajectory>& out, std::vector<tasks::Problem>& problems);
  bool correct_in_loss() const;
  void correct_staleness(Batch& b, Metrics& out);  // pi_prox and the truncated weights (or the loss's), metrics
  int64_t collect(Batch& b);                       // the step's rounds; returns the prompts drawn
  Batch round(Batch& b, int64_t n_prompts, int64_t round);
  int64_t keep_informative(Batch& b, Batch& rb);
  void rollout(int64_t n_prompts, int64_t round, std::vector<Trajectory>& out, std::vector<tasks::Problem>& problems);
  void converse(size_t first, int64_t round, std::vector<Trajectory>& out, const std::vector<tasks::Problem>& problems);
  uint64_t round_seed(int64_t step, int64_t round) const;
  rollout::RolloutRequest conversation_request(int64_t step, int64_t round) const;  // [env]: a round's request
  static std::string episode_tag(int64_t step, int64_t round);                      // [env]: "s<step>r<round>"
  size_t draw_problems(int64_t n_prompts, int64_t step, int64_t round, std::vector<tasks::Problem>& problems);
  std::vector<rollout::RolloutRequest> requests(const std::vector<tasks::Problem>& problems, size_t first, int64_t step,
                                                int64_t round) const;
  void score(Batch& b, size_t from);
  void set_loss_masks(Batch& b) const;
  void set_advantages(Batch& b);
  void estimate_advantages(Batch& b);
  void set_weights(Batch& b);
  Metrics update(Batch& b);
  Metrics metrics(const Batch& b, int64_t drawn, const Metrics& update, double train_s, double step_s) const;

  Transformer& policy_;
  std::shared_ptr<const tasks::Task> task_;
  PromptCodec codec_;
  RlConfig cfg_;
  std::shared_ptr<RewardSet> rewards_;
  std::vector<Method*> methods_;
  Optimizer opt_;
  Scorer scorer_;
  std::unique_ptr<rollout::PooledEngine> engine_;  // the rollout engine and its KV pool (rl.kv_memory_mb)
  std::unique_ptr<KeptActivations> kept_;          // the rollout's kept activations (reuse_activations)
  std::unique_ptr<SpeculativeRollouts> spec_;      // [rl.speculative]
  std::unique_ptr<ConversationSource> env_;        // [env]: conversations instead of single completions
  std::mutex env_mu_;                              // [env] with [rl.async]: one thread converses at a time
  Metrics env_metrics_;                            // [env]: the source's metrics of the step's last conversations
  std::unique_ptr<Explorer> explorer_;             // [rl.async] with max_staleness > 0: a thread or ranks
  bool remote_ = false;                            // explorer_ is the explorer ranks
  std::deque<ExploredBatch> explored_;             // batches explored ahead: this step's first (the last may run)
  int64_t planned_steps_ = -1;
  double wait_s_ = 0;  // [rl.async]: seconds this step waited for the explorer
  bool async() const { return explorer_ != nullptr; }
  Batch batch_;
  int64_t step_ = 0;
  uint64_t cursor_ = 0;
  double rollout_s_ = 0, reward_s_ = 0;
  dist::Communicator* comm_ = nullptr;
  bool interruptible_ = false;
  double failures_elsewhere_ = 0;  // reward failures other ranks counted while scoring their share
  int ranks() const { return comm_ ? comm_->size() : 1; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
};

}  // namespace temper::rl
